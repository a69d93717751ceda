"""Request lines carry every argument of a call; output lines come back as the same Completion."""

from __future__ import annotations

from iba.batch.lines import (ResultLine, ResultResponse, call_params, completion_body, request_line,
                             result_completion)
from iba.llm.base import Completion, ModelRequest, ToolCall, ToolSpec

TOOL = ToolSpec(name="order_food", description="Order.", parameters={
    "type": "object", "properties": {"dish": {"type": "string"}}, "required": ["dish"]})
SCHEMA = {"type": "object", "properties": {"passed": {"type": "boolean"}}, "required": ["passed"]}


def test_a_body_reads_back_as_the_call_that_made_it():
    msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "order_food", "arguments": '{"dish": "pho"}'}}]},
            {"role": "tool", "tool_call_id": "c1", "name": "order_food", "content": "ok"}]
    line = request_line("openai:gpt-x", "gpt-x", ModelRequest(
        messages=msgs, max_tokens=64, temperature=0.0, seed=7, tools=[TOOL], tool_choice="order_food", stop=["\n\n"]))
    assert line.method == "POST" and line.url == "/v1/chat/completions" and line.body["model"] == "gpt-x"
    assert line.body["tool_choice"] == {"type": "function", "function": {"name": "order_food"}}
    p = call_params(line.body)
    assert p.messages == msgs and p.max_tokens == 64 and p.seed == 7 and p.stop == ["\n\n"]
    assert p.tools == [TOOL] and p.tool_choice == "order_food" and p.json_schema is None
    js = request_line("openai:gpt-x", "gpt-x", ModelRequest(messages=msgs[:2], max_tokens=32, temperature=0.7,
                                                            json_schema=SCHEMA))
    assert js.body["response_format"]["type"] == "json_schema"
    assert call_params(js.body).json_schema == SCHEMA and call_params(js.body).temperature == 0.7


def test_custom_id_is_the_same_for_the_same_call_and_differs_otherwise():
    def req(text: str) -> ModelRequest:
        return ModelRequest(messages=[{"role": "user", "content": text}], max_tokens=8, seed=1)

    a = request_line("local:m", "local:m", req("hi"))
    b = request_line("local:m", "local:m", req("hi"))
    c = request_line("local:m", "local:m", req("hi!"))
    d = request_line("local:n", "local:m", req("hi"))
    assert a.custom_id == b.custom_id and len({a.custom_id, c.custom_id, d.custom_id}) == 3


def test_an_answer_comes_back_as_the_completion_written():
    comp = Completion(text="", tool_calls=[ToolCall(id="call_0", name="order_food", arguments={"dish": "phở"})],
                      prompt_tokens=30, completion_tokens=9, reused_prompt_tokens=4, finish_reason="tool_calls")
    line = ResultLine(custom_id="iba-x", response=ResultResponse(status_code=200, body=completion_body(comp, "m")))
    back = result_completion(ResultLine.model_validate_json(line.model_dump_json()), [TOOL], 64, "openai:m")
    assert back.tool_calls == comp.tool_calls and back.prompt_tokens == 30 and back.completion_tokens == 9
    assert back.reused_prompt_tokens == 4 and back.model == "openai:m"
    text = Completion(text='{"passed": true}', prompt_tokens=5, completion_tokens=4, finish_reason="stop")
    line = ResultLine(custom_id="iba-y", response=ResultResponse(status_code=200, body=completion_body(text, "m")))
    assert result_completion(line, None, 64, "m").text == '{"passed": true}'


def test_provider_lines_with_extra_fields_parse():
    raw = ('{"id": "batch_req_1", "custom_id": "iba-1", "response": {"status_code": 500, "request_id": "r", '
           '"body": {"error": {"message": "overloaded"}}}, "error": null, "new_field": 1}')
    line = ResultLine.model_validate_json(raw)
    assert not line.ok and line.problem() == "HTTP 500: overloaded"
