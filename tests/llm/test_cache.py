from __future__ import annotations

import subprocess
import sys
import textwrap

from iba.llm.base import Completion, ModelRequest, ToolSpec
from iba.llm.cache import ResponseCache, cache_key, cacheable, through_cache

MSGS = [{"role": "user", "content": "hi"}]
REQ = ModelRequest(messages=MSGS, max_tokens=8)
BASE = {"max_tokens": 8, "temperature": 0.0, "seed": None, "json_schema": None, "tools": None, "tool_choice": None, "stop": None}


def test_key_covers_model_messages_and_every_param():
    k = cache_key("local:m#abc", MSGS, BASE)
    assert k == cache_key("local:m#abc", [dict(MSGS[0])], dict(BASE))  # stable
    variants = [
        cache_key("local:m#other", MSGS, BASE),
        cache_key("local:m#abc", [{"role": "user", "content": "hi!"}], BASE),
        cache_key("local:m#abc", MSGS, dict(BASE, seed=1)),
        cache_key("local:m#abc", MSGS, dict(BASE, json_schema={"type": "object"})),
        cache_key("local:m#abc", MSGS, dict(BASE, tools=[{"name": "t"}])),
        cache_key("local:m#abc", MSGS, dict(BASE, tool_choice="t")),
        cache_key("local:m#abc", MSGS, dict(BASE, max_tokens=9)),
    ]
    assert len({k, *variants}) == len(variants) + 1


def test_keys_and_batch_ids_are_those_of_the_calls_before_model_request():
    """One ModelRequest makes every key: these hashes were computed by the eight-keyword signature
    it replaced (issue 34), so existing response caches and batch folders still answer."""
    from iba.batch.lines import request_line

    msgs = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "Book a table é"}]
    tool = ToolSpec(name="book", description="Book it", parameters={"type": "object", "properties": {"n": {"type": "integer"}}})
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    tooled = ModelRequest(messages=msgs, max_tokens=64, seed=7, tools=[tool], tool_choice="book", stop=["</s>"])
    json_reply = ModelRequest(messages=msgs, json_schema=schema)
    assert cache_key("local:m#abc", msgs, tooled.cache_params()) == (
        "db540adc9360f5b36daf1dd6f746354c0949d0b6e7e253b429542d60931b11df")
    assert cache_key("openai:gpt-x", msgs, json_reply.cache_params()) == (
        "d3894dec52e9e567d4dc79bf743b904cb12dd7170cc1f194b2606f377291418a")
    assert request_line("openai:gpt-x", "gpt-x", tooled.offered()).custom_id == "iba-5517e485f16f1b1151430cb7c1391ed5970633a0"
    assert request_line("openai:gpt-x", "gpt-x", json_reply).custom_id == "iba-a1e61aeb7cf814fecfa3026703c7f7bcdc64075b"


def test_random_requests_are_not_cached():
    assert cacheable(BASE) and cacheable(dict(BASE, temperature=0.7, seed=3))
    assert not cacheable(dict(BASE, temperature=0.7))


async def test_hits_are_marked_cached_and_errors_are_not_stored(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    made = []

    async def produce():
        made.append(1)
        return Completion(text="hello", prompt_tokens=3, completion_tokens=1, model="m")

    async def boom():
        raise RuntimeError("server down")

    try:
        await through_cache(cache, "m#1", "m", REQ, boom)
    except RuntimeError:
        pass
    assert len(cache) == 0
    first = await through_cache(cache, "m#1", "m", REQ, produce)
    second = await through_cache(cache, "m#1", "m", REQ, produce)
    assert made == [1] and not first.cached and second.cached
    assert second.text == "hello" and second.prompt_tokens == 3
    await through_cache(None, "m#1", "m", REQ, produce)
    assert made == [1, 1]


def test_concurrent_processes_share_one_cache(tmp_path):
    db = tmp_path / "shared.sqlite"
    script = textwrap.dedent(
        f"""
        import sys
        from iba.llm.base import Completion, ModelRequest, ToolSpec
        from iba.llm.cache import ResponseCache
        c = ResponseCache({str(db)!r})
        w = sys.argv[1]
        for i in range(40):
            c.put(f"{{w}}-{{i}}", "m", Completion(text=w))
            c.put("same", "m", Completion(text=w))
            assert c.get(f"{{w}}-{{i}}").text == w
        """
    )
    procs = [subprocess.Popen([sys.executable, "-c", script, w]) for w in ("a", "b", "c")]
    assert [p.wait(timeout=60) for p in procs] == [0, 0, 0]
    cache = ResponseCache(db)
    assert len(cache) == 121
    assert cache.get("same").text in {"a", "b", "c"}
