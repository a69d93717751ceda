"""Schema grammars keep strings valid JSON; replies with raw control characters still parse."""

from __future__ import annotations

import json

import pytest

from iba.llm import ToolSpec
from iba.llm.grammar import schema_gbnf
from iba.llm.jsontext import extract_json_object
from iba.llm.toolcalls import forced_call_gbnf, parse_arguments

QUOTE = {"type": "object", "properties": {"quote": {"type": "string", "maxLength": 200}}, "required": ["quote"]}


def _char_rule(gbnf: str) -> str:
    return next(line for line in gbnf.splitlines() if line.startswith("char ::="))


def test_string_characters_exclude_control_characters():
    rule = _char_rule(schema_gbnf(QUOTE))
    assert rule.startswith('char ::= [^"\\\\\\x7F\\x00-\\x1F] |'), rule


def test_the_grammars_compile_and_tool_calls_share_the_rule():
    from llama_cpp import LlamaGrammar

    LlamaGrammar.from_string(schema_gbnf(QUOTE), verbose=False)
    tool = ToolSpec(name="note", description="Save a note.", parameters=QUOTE)
    call = forced_call_gbnf([tool], "note")
    LlamaGrammar.from_string(call, verbose=False)
    assert _char_rule(call) == _char_rule(schema_gbnf(QUOTE))


def test_a_raw_newline_inside_a_string_reads_as_text():
    reply = '{"items":[{"quote":"I\'ve been meaning\n","date":"2025-09-10"}]}'
    with pytest.raises(ValueError):
        json.loads(reply)  # strict JSON: the case this guards
    assert extract_json_object(reply)["items"][0]["quote"] == "I've been meaning\n"
    assert extract_json_object("Here it is: " + reply + " done")["items"][0]["date"] == "2025-09-10"
    assert parse_arguments('{"text": "two\nlines"}') == {"text": "two\nlines"}


@pytest.mark.slow
async def test_the_embedded_model_writes_strict_json_where_it_wants_line_breaks(smollm_backend):
    # With llama-cpp-python's own grammar SmolLM2 answers this with raw newlines in the string
    # (json.loads: "Invalid control character"); with schema_gbnf it cannot.
    msgs = [{"role": "user", "content": 'Write a four-line poem about rain, one line per line, as JSON {"poem": ...}.'}]
    schema = {"type": "object", "properties": {"poem": {"type": "string", "maxLength": 200}}, "required": ["poem"]}
    comp = await smollm_backend.complete(msgs, max_tokens=120, json_schema=schema, temperature=0.0, seed=1)
    assert isinstance(json.loads(comp.text)["poem"], str)


def test_a_broken_object_does_not_yield_its_inner_object():
    cut = '{"plan": "book it", "params": {"room": "suite"}, "notes": ["a'
    with pytest.raises(ValueError, match="no JSON object found"):
        extract_json_object(cut)
    with pytest.raises(ValueError):
        extract_json_object('[{"a": 1}, {"b": 2}')  # an unclosed list of objects: neither is the reply
    # prose before the object, colon included, still finds it
    assert extract_json_object('Here is the JSON: {"a": 1}') == {"a": 1}
    assert extract_json_object('Sure.\n{"a": {"b": 2}} hope this helps') == {"a": {"b": 2}}
    # a complete list is not broken: its first object, as before
    assert extract_json_object('[{"name": "note", "arguments": {}}]') == {"name": "note", "arguments": {}}
