from __future__ import annotations

import time
from email.utils import formatdate

import pytest

from iba.llm.base import LLMError
from iba.llm.retry import RetryPolicy, Verdict, call_with_retries, parse_retry_after, redact


class Sleeps(list):
    async def __call__(self, s: float) -> None:
        self.append(s)


def test_parse_retry_after_seconds_date_and_ms():
    assert parse_retry_after({"Retry-After": "7"}) == 7.0
    assert parse_retry_after({"retry-after-ms": "1500"}) == 1.5
    now = time.time()
    date = formatdate(now + 30, usegmt=True)
    assert parse_retry_after({"Retry-After": date}, now=now) == pytest.approx(30, abs=1.0)
    assert parse_retry_after({"Retry-After": formatdate(now - 30, usegmt=True)}, now=now) == 0.0
    assert parse_retry_after({"Retry-After": "soon"}) is None
    assert parse_retry_after({}) is None


def test_backoff_doubles_is_capped_and_jitter_is_deterministic():
    a = RetryPolicy(base_delay=1.0, max_delay=5.0, jitter=0.0)
    assert [a.backoff(i) for i in (1, 2, 3, 4)] == [1.0, 2.0, 4.0, 5.0]
    j1, j2 = RetryPolicy(seed=3), RetryPolicy(seed=3)
    seq1, seq2 = [j1.backoff(i) for i in range(1, 5)], [j2.backoff(i) for i in range(1, 5)]
    assert seq1 == seq2
    assert all(0.75 * 0.5 * 2 ** (i - 1) <= d <= 1.25 * 0.5 * 2 ** (i - 1) for i, d in enumerate(seq1, 1))
    # a server's Retry-After wins over backoff, but within a cap
    assert RetryPolicy().delay(1, 12.0) == 12.0
    assert RetryPolicy(max_retry_after=60).delay(1, 3600) == 60


class Flaky(Exception):
    pass


async def test_retries_then_succeeds_with_server_delay():
    sleeps, calls = Sleeps(), []

    async def fn():
        calls.append(1)
        if len(calls) < 3:
            raise Flaky("busy")
        return "done"

    policy = RetryPolicy(max_retries=3, jitter=0.0, sleep=sleeps)
    out = await call_with_retries(fn, model_id="m:x", policy=policy, classify=lambda e: Verdict(True, retry_after=2.5))
    assert out == "done" and len(calls) == 3 and sleeps == [2.5, 2.5]


async def test_gives_up_after_max_retries_naming_model_and_error_without_secret():
    sleeps, calls = Sleeps(), []

    async def fn():
        calls.append(1)
        raise Flaky(f"upstream said no to key sk-live-SECRET123456 attempt {len(calls)}")

    policy = RetryPolicy(max_retries=2, jitter=0.0, base_delay=1.0, sleep=sleeps)
    with pytest.raises(LLMError) as ei:
        await call_with_retries(fn, model_id="openai:gpt-x", policy=policy, classify=lambda e: Verdict(True), secrets=["SECRET123456"])
    msg = str(ei.value)
    assert "openai:gpt-x" in msg and "after 3 attempts" in msg and "attempt 3" in msg and "Flaky" in msg
    assert "SECRET" not in msg and ei.value.__cause__ is None
    assert len(calls) == 3 and sleeps == [1.0, 2.0]


async def test_non_retryable_fails_at_once():
    sleeps, calls = Sleeps(), []

    async def fn():
        calls.append(1)
        raise ValueError("bad request")

    with pytest.raises(LLMError, match="m:y: request failed: ValueError: bad request"):
        await call_with_retries(fn, model_id="m:y", policy=RetryPolicy(sleep=sleeps), classify=lambda e: Verdict(False))
    assert calls == [1] and sleeps == []


def test_redact_scrubs_given_secrets_and_key_shapes():
    assert redact("key=abcd1234 x", ["abcd1234"]) == "key=*** x"
    assert "sk-proj-AAAABBBBCCCC" not in redact("Incorrect API key provided: sk-proj-AAAABBBBCCCC")
