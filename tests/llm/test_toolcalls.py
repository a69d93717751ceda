from __future__ import annotations

import json

import pytest

from iba.llm.base import Completion, ToolCall, ToolSpec
from iba.llm.toolcalls import (
    assistant_message,
    check_tool_choice,
    forced_call_gbnf,
    messages_for_template,
    openai_messages,
    parse_text_tool_calls,
    tool_result_message,
)

ORDER = ToolSpec(
    name="order_food",
    parameters={"type": "object", "properties": {"spice": {"type": "string", "enum": ["mild", "hot"]}}, "required": ["spice"]},
)


def test_parse_hermes_blocks_fenced_and_bare_calls():
    text = 'Let me order.\n<tool_call>\n{"name": "order_food", "arguments": {"spice": "mild"}}\n</tool_call>'
    rest, calls = parse_text_tool_calls(text, ["order_food"])
    assert rest == "Let me order." and calls == [ToolCall(id="call_0", name="order_food", arguments={"spice": "mild"})]
    _, calls = parse_text_tool_calls('```json\n{"name": "order_food", "arguments": "{\\"spice\\": \\"hot\\"}"}\n```', ["order_food"])
    assert calls[0].arguments == {"spice": "hot"}
    # unknown tool or broken JSON: left in the text, not dropped
    rest, calls = parse_text_tool_calls('<tool_call>{"name": "launch", "arguments": {}}</tool_call>', ["order_food"])
    assert calls == [] and "launch" in rest
    rest, calls = parse_text_tool_calls('{"name": "Ann"}', ["order_food"])
    assert calls == [] and rest == '{"name": "Ann"}'


def test_tool_choice_must_name_a_tool():
    check_tool_choice([ORDER], "order_food")
    check_tool_choice([ORDER], "auto")
    with pytest.raises(ValueError, match="order_food"):
        check_tool_choice([ORDER], "order_pizza")


def test_forced_grammar_wraps_the_schema_in_tool_call_tags():
    g = forced_call_gbnf([ORDER], "order_food")
    assert g.startswith('root ::= "<tool_call>\\n" iba-call "\\n</tool_call>"')
    assert "iba-call ::=" in g and '\\"order_food\\"' in g and '\\"mild\\"' in g
    assert g.count("root ::=") == 1


def test_history_for_a_template_without_tools():
    comp = Completion(tool_calls=[ToolCall(id="c1", name="order_food", arguments={"spice": "mild"})])
    history = [
        {"role": "user", "content": "order"},
        assistant_message(comp),
        tool_result_message(comp.tool_calls[0], {"ok": True}),
    ]
    msgs = messages_for_template(history, [ORDER], template_has_tools=False)
    assert msgs[0]["role"] == "system" and "<tools>" in msgs[0]["content"] and "order_food" in msgs[0]["content"]
    assert "<tool_call>" in msgs[2]["content"] and msgs[2]["role"] == "assistant"
    assert msgs[3] == {"role": "user", "content": '<tool_response>\n{"ok": true}\n</tool_response>'}
    # a tool-aware template gets dict arguments (it applies tojson itself)
    aware = messages_for_template(history, [ORDER], template_has_tools=True)
    assert aware[1]["tool_calls"] == [{"name": "order_food", "arguments": {"spice": "mild"}}]
    # the OpenAI API gets JSON text
    api = openai_messages(history)
    assert json.loads(api[1]["tool_calls"][0]["function"]["arguments"]) == {"spice": "mild"}
