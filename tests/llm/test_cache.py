from __future__ import annotations

import subprocess
import sys
import textwrap

from iba.llm.base import Completion
from iba.llm.cache import ResponseCache, cache_key, cacheable, through_cache

MSGS = [{"role": "user", "content": "hi"}]
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
        await through_cache(cache, "m#1", "m", MSGS, BASE, boom)
    except RuntimeError:
        pass
    assert len(cache) == 0
    first = await through_cache(cache, "m#1", "m", MSGS, BASE, produce)
    second = await through_cache(cache, "m#1", "m", MSGS, BASE, produce)
    assert made == [1] and not first.cached and second.cached
    assert second.text == "hello" and second.prompt_tokens == 3
    await through_cache(None, "m#1", "m", MSGS, BASE, produce)
    assert made == [1, 1]


def test_concurrent_processes_share_one_cache(tmp_path):
    db = tmp_path / "shared.sqlite"
    script = textwrap.dedent(
        f"""
        import sys
        from iba.llm.base import Completion
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
