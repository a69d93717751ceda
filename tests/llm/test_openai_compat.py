"""The openai: backend against a scripted local HTTP server (real sockets, the real SDK)."""

from __future__ import annotations

import json
import time
from email.utils import formatdate

import pytest

from iba.llm import LLMError, ToolSpec, resolve_backend
from tests.llm.fake_server import FakeOpenAIServer, Reply, chat_reply

KEY = "sk-test-TOPSECRET0123456789"
MSGS = [{"role": "user", "content": "Reply in JSON."}]
SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
ORDER = ToolSpec(
    name="order_food",
    description="Order food",
    parameters={"type": "object", "properties": {"spice": {"type": "string", "enum": ["mild", "hot"]}}, "required": ["spice"]},
)


class Sleeps(list):
    async def __call__(self, s: float) -> None:
        self.append(s)


@pytest.fixture()
def make(monkeypatch, tmp_path):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)

    def _make(server: FakeOpenAIServer, **kw):
        be = resolve_backend("openai:fake-model", base_url=server.base_url, cache_dir=tmp_path, **kw)
        be.retry_policy.sleep = Sleeps()
        return be

    return _make


async def test_plain_completion_sends_the_key_and_counts_tokens(make):
    with FakeOpenAIServer([chat_reply("hello", usage=(12, 3))]) as srv:
        be = make(srv, use_cache=False)
        c = await be.complete(MSGS, max_tokens=9, seed=4, stop=["\n"])
    assert (c.text, c.prompt_tokens, c.completion_tokens, c.model, c.cached) == ("hello", 12, 3, "openai:fake-model", False)
    req = srv.requests[0]
    assert req["model"] == "fake-model" and req["max_tokens"] == 9 and req["seed"] == 4 and req["stop"] == ["\n"]
    assert req["temperature"] == 0.0 and "response_format" not in req
    assert srv.headers[0]["authorization"] == f"Bearer {KEY}"


async def test_429_honours_retry_after_seconds_then_succeeds(make):
    with FakeOpenAIServer([Reply(429, {"error": {"message": "slow down"}}, {"Retry-After": "3"}), chat_reply("ok")]) as srv:
        be = make(srv, use_cache=False)
        c = await be.complete(MSGS)
    assert c.text == "ok" and len(srv.requests) == 2 and be.retry_policy.sleep == [3.0]


async def test_503_honours_retry_after_http_date(make):
    when = formatdate(time.time() + 20, usegmt=True)
    with FakeOpenAIServer([Reply(503, {"error": {"message": "overloaded"}}, {"Retry-After": when}), chat_reply("ok")]) as srv:
        be = make(srv, use_cache=False)
        await be.complete(MSGS)
    [slept] = be.retry_policy.sleep
    assert 15 <= slept <= 21


async def test_gives_up_after_max_retries_without_leaking_the_key(make):
    # The server echoes the Authorization header back, as a misbehaving proxy might.
    def script(body, headers):
        return Reply(500, {"error": {"message": f"internal error; you sent {headers.get('authorization')}"}})

    with FakeOpenAIServer(script) as srv:
        be = make(srv, use_cache=False, max_retries=2)
        with pytest.raises(LLMError) as ei:
            await be.complete(MSGS)
    msg = str(ei.value)
    assert len(srv.requests) == 3 and len(be.retry_policy.sleep) == 2
    assert be.retry_policy.sleep[1] > be.retry_policy.sleep[0]  # exponential
    assert "openai:fake-model" in msg and "500" in msg and "after 3 attempts" in msg
    assert "TOPSECRET" not in msg and "TOPSECRET" not in be.model_id and ei.value.__cause__ is None


async def test_client_errors_are_not_retried(make):
    with FakeOpenAIServer([Reply(401, {"error": {"message": "bad key"}})]) as srv:
        be = make(srv, use_cache=False)
        with pytest.raises(LLMError, match="401"):
            await be.complete(MSGS)
    assert len(srv.requests) == 1


async def test_timeout_becomes_an_llm_error(make):
    with FakeOpenAIServer([Reply(delay_s=2.0, body=chat_reply("late").body)]) as srv:
        be = make(srv, use_cache=False, timeout=0.3, max_retries=0)
        t0 = time.monotonic()
        with pytest.raises(LLMError, match="(?i)time"):
            await be.complete(MSGS)
    assert time.monotonic() - t0 < 1.9


async def test_cache_hits_skip_the_server_and_errors_are_not_cached(make):
    with FakeOpenAIServer([Reply(400, {"error": {"message": "nope"}}), chat_reply("first"), chat_reply("second")]) as srv:
        be = make(srv)
        with pytest.raises(LLMError):
            await be.complete(MSGS)
        a = await be.complete(MSGS)
        b = await be.complete(MSGS)
        c = await be.complete(MSGS, seed=1)
    assert (a.text, a.cached) == ("first", False)
    assert (b.text, b.cached, b.prompt_tokens) == ("first", True, a.prompt_tokens)
    assert (c.text, c.cached) == ("second", False)
    assert len(srv.requests) == 3


async def test_cache_flag_off_always_asks(make):
    with FakeOpenAIServer([chat_reply("x")]) as srv:
        be = make(srv, use_cache=False)
        await be.complete(MSGS)
        await be.complete(MSGS)
    assert len(srv.requests) == 2


async def test_json_object_with_schema_is_sent_first(make):
    with FakeOpenAIServer([chat_reply('{"a": 1}')]) as srv:
        be = make(srv, use_cache=False)
        c = await be.complete(MSGS, json_schema=SCHEMA)
    assert srv.requests[0]["response_format"] == {"type": "json_object", "schema": SCHEMA}
    assert json.loads(c.text) == {"a": 1} and be.json_mode == "json_object_schema"


async def test_rejected_json_modes_fall_back_to_prompt_and_stay_there(make):
    def script(body, headers):
        fmt = body.get("response_format")
        if fmt and fmt["type"] == "json_object":
            return Reply(400, {"error": {"message": "unknown field schema"}})
        if fmt and fmt["type"] == "json_schema":
            return Reply(500, {"error": {"message": "json_schema not supported"}})
        return chat_reply('{"a": 2}')

    with FakeOpenAIServer(script) as srv:
        be = make(srv, use_cache=False)
        c = await be.complete(MSGS, json_schema=SCHEMA)
        assert [r.get("response_format", {}).get("type") for r in srv.requests] == ["json_object", "json_schema", None]
        assert "JSON schema" in srv.requests[2]["messages"][-1]["content"] and '"a"' in srv.requests[2]["messages"][-1]["content"]
        assert c.text == '{"a": 2}' and be.json_mode == "prompt"
        await be.complete([{"role": "user", "content": "again"}], json_schema=SCHEMA)
        assert len(srv.requests) == 4 and "response_format" not in srv.requests[3]  # remembered
        assert MSGS == [{"role": "user", "content": "Reply in JSON."}]  # caller's messages untouched


async def test_tool_calls_are_requested_and_parsed(make):
    call = {"id": "call_9", "type": "function", "function": {"name": "order_food", "arguments": '{"spice": "mild"}'}}
    with FakeOpenAIServer([chat_reply(None, tool_calls=[call], finish="tool_calls")]) as srv:
        be = make(srv, use_cache=False)
        c = await be.complete(MSGS, tools=[ORDER], tool_choice="order_food")
    req = srv.requests[0]
    assert req["tools"][0]["function"]["name"] == "order_food"
    assert req["tool_choice"] == {"type": "function", "function": {"name": "order_food"}}
    assert [(t.id, t.name, t.arguments) for t in c.tool_calls] == [("call_9", "order_food", {"spice": "mild"})]
    assert c.finish_reason == "tool_calls" and c.text == ""


async def test_hermes_text_tool_calls_from_plain_servers_are_parsed(make):
    text = '<tool_call>\n{"name": "order_food", "arguments": {"spice": "hot"}}\n</tool_call>'
    with FakeOpenAIServer([chat_reply(text)]) as srv:
        be = make(srv, use_cache=False)
        c = await be.complete(MSGS, tools=[ORDER], tool_choice="auto")
    assert srv.requests[0]["tool_choice"] == "auto"
    assert c.tool_calls[0].arguments == {"spice": "hot"} and c.text == ""


async def test_unknown_tool_choice_is_refused_before_any_request(make):
    with FakeOpenAIServer([chat_reply("x")]) as srv:
        be = make(srv, use_cache=False)
        with pytest.raises(ValueError, match="order_pizza"):
            await be.complete(MSGS, tools=[ORDER], tool_choice="order_pizza")
    assert srv.requests == []


def test_one_backend_serves_several_event_loops(make):
    import asyncio

    with FakeOpenAIServer([chat_reply("a")]) as srv:
        be = make(srv, use_cache=False)
        assert asyncio.run(be.complete(MSGS)).text == "a"
        assert asyncio.run(be.complete(MSGS)).text == "a"  # a fresh loop, a fresh connection pool
    assert len(srv.requests) == 2


async def test_local_server_without_a_key_gets_a_placeholder(monkeypatch, tmp_path):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with FakeOpenAIServer([chat_reply("x")]) as srv:
        be = resolve_backend("openai:m", base_url=srv.base_url, cache_dir=tmp_path, use_cache=False)
        await be.complete(MSGS)
    assert srv.headers[0]["authorization"] == "Bearer sk-no-key"
