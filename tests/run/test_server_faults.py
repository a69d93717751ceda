"""Model-server faults, against a real llama_cpp.server (SmolLM2) behind a fault-injecting proxy (slow).

Backend level: every fault is retried a bounded number of times with backoff (attempts counted at
the proxy, Retry-After respected), then the call succeeds (a transient fault) or raises the
ModelCallError subclass that names the fault. End to end: `iba run` under a persistent fault
stores errored, unscored records (never 0), lists them, exits non-zero and does not crash; once
the fault clears, `--retry-errored` makes them ok.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from iba.llm import resolve_backend
from iba.llm.retry import (
    ModelBadResponse,
    ModelConnectionError,
    ModelRateLimited,
    ModelRequestRejected,
    ModelServerError,
    ModelTimeout,
    ModelTruncated,
    RetryPolicy,
)
from iba.run.store import Store
from tests.llm.fault_proxy import Fault, FaultProxy
from tests.run.helpers import tiny_dataset

pytestmark = pytest.mark.slow

MODEL = "smollm2-135m"
MSGS = [{"role": "user", "content": "Say hello to my friend Ada in one sentence."}]
MAX_TOKENS = 16


@pytest.fixture()
def proxy(llama_server):
    with FaultProxy(llama_server) as p:
        yield p


def _backend(proxy: FaultProxy, *, max_retries: int = 2, base_delay: float = 0.05, timeout: float = 60.0):
    be = resolve_backend(f"openai:{MODEL}", base_url=proxy.base_url, use_cache=False, timeout=timeout,
                         max_retries=max_retries)
    be.retry_policy = RetryPolicy(max_retries=max_retries, base_delay=base_delay, jitter=0.0)  # real sleeps
    return be


@pytest.fixture(autouse=True)
def _no_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # the local server needs none


async def test_unfaulted_requests_pass_through_unchanged(proxy):
    c = await _backend(proxy).complete(MSGS, max_tokens=MAX_TOKENS)
    assert c.text.strip() and 0 < c.completion_tokens <= MAX_TOKENS
    assert [h.fault for h in proxy.completions()] == [None]


TRANSIENT = [
    pytest.param(Fault.http(500), id="500"),
    pytest.param(Fault.http(503), id="503"),
    pytest.param(Fault.drop(), id="dropped-connection"),
    pytest.param(Fault.invalid_json(), id="invalid-json"),
    pytest.param(Fault.cut_body(), id="cut-body"),
    pytest.param(Fault.length(), id="finish-length"),
    pytest.param(Fault.delay(3.0), id="delay-past-timeout"),
]


@pytest.mark.parametrize("fault", TRANSIENT)
async def test_a_transient_fault_is_retried_then_succeeds(proxy, fault):
    proxy.then(fault)
    be = _backend(proxy, timeout=1.0 if fault.kind == "delay" else 60.0)
    c = await be.complete(MSGS, max_tokens=MAX_TOKENS)
    # the second attempt reached the real server and its answer came back whole
    assert c.text.strip() and c.finish_reason in ("stop", "length") and c.completion_tokens > 0
    assert [h.fault for h in proxy.completions()] == [fault.kind, None]
    if fault.kind == "delay":
        assert 0.9 <= proxy.gaps()[0] < 2.9  # gave up at its 1 s timeout, not at the 3 s answer


async def test_429_retry_after_is_respected_over_backoff(proxy):
    proxy.then(Fault.http(429, retry_after=1), Fault.http(503, retry_after=1))
    be = _backend(proxy, base_delay=0.01)  # backoff alone would retry after 10-20 ms
    c = await be.complete(MSGS, max_tokens=MAX_TOKENS)
    assert c.text.strip()
    assert [h.fault for h in proxy.completions()] == ["status", "status", None]
    assert all(g >= 0.95 for g in proxy.gaps())


async def test_backoff_doubles_and_retries_are_bounded(proxy):
    proxy.always(Fault.http(500))
    be = _backend(proxy, max_retries=3, base_delay=0.2)
    with pytest.raises(ModelServerError) as ei:
        await be.complete(MSGS, max_tokens=MAX_TOKENS)
    assert len(proxy.completions()) == 4  # 1 + max_retries, then it stops
    gaps = proxy.gaps()
    for gap, expected in zip(gaps, (0.2, 0.4, 0.8)):
        assert expected * 0.95 <= gap < expected + 1.0
    assert gaps[0] < gaps[1] < gaps[2]
    assert ei.value.attempts == 4 and ei.value.status == 500 and "after 4 attempts (server_error, HTTP 500)" in str(ei.value)


PERSISTENT = [
    pytest.param(Fault.delay(5.0), ModelTimeout, "timeout", id="delay-past-timeout"),
    pytest.param(Fault.http(429, retry_after=0), ModelRateLimited, "rate_limited, HTTP 429", id="429"),
    pytest.param(Fault.http(500), ModelServerError, "server_error, HTTP 500", id="500"),
    pytest.param(Fault.http(503), ModelServerError, "server_error, HTTP 503", id="503"),
    pytest.param(Fault.drop(), ModelConnectionError, "connection, RemoteProtocolError: Server disconnected", id="dropped"),
    pytest.param(Fault.invalid_json(), ModelBadResponse, "bad_response", id="invalid-json"),
    pytest.param(Fault.cut_body(), ModelConnectionError, "connection, RemoteProtocolError: peer closed connection",
                 id="cut-body"),
    pytest.param(Fault.length(), ModelTruncated, "truncated", id="finish-length"),
]


@pytest.mark.parametrize("fault, error, reason", PERSISTENT)
async def test_a_persistent_fault_ends_as_the_error_naming_it(proxy, fault, error, reason):
    proxy.always(fault)
    be = _backend(proxy, max_retries=1, timeout=1.0 if fault.kind == "delay" else 60.0)
    with pytest.raises(error) as ei:
        await be.complete(MSGS, max_tokens=MAX_TOKENS)
    msg = str(ei.value)
    assert f"openai:{MODEL}: request failed after 2 attempts ({reason}" in msg, msg
    assert ei.value.reason == error.reason and ei.value.attempts == 2
    assert len(proxy.completions()) == 2
    # the provider exception (and the request headers it holds) is neither chained nor kept as context
    assert ei.value.__cause__ is None and ei.value.__context__ is None


async def test_a_client_error_is_not_retried(proxy):
    proxy.always(Fault.http(400))
    with pytest.raises(ModelRequestRejected, match=r"request failed \(rejected, HTTP 400\)"):
        await _backend(proxy).complete(MSGS, max_tokens=MAX_TOKENS)
    assert len(proxy.completions()) == 1


async def test_a_reply_that_used_all_of_max_tokens_is_the_callers_limit(proxy):
    # finish_reason "length" at max_tokens is a normal cut (the caller's budget), not a fault
    c = await _backend(proxy).complete([{"role": "user", "content": "Count from 1 to 100."}], max_tokens=4)
    assert c.finish_reason == "length" and c.completion_tokens == 4
    assert len(proxy.completions()) == 1


# ---------------------------------------------------------------------- end to end: `iba run`


def _iba(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "iba.cli", *args], capture_output=True, text=True, timeout=300, cwd=cwd)


def test_iba_run_under_a_persistent_fault_errors_then_retry_errored_recovers(proxy, tmp_path):
    ds = tiny_dataset(tmp_path / "ds")  # i0 generate, i1 call_api
    store = tmp_path / "runs.sqlite"
    args = ["run", str(ds), "--agent", "direct?max_tokens=24", "--model", f"openai:{MODEL}",
            "--base-url", proxy.base_url, "--store", str(store), "--no-cache", "--cache-dir", str(tmp_path / "cache"),
            "--judges", "none", "--quiet"]
    proxy.always(Fault.http(503))  # 503, not 500: a 500 would also make the backend drop its JSON mode
    first = _iba(*args, cwd=tmp_path)
    assert first.returncode == 1, first.stderr  # a fault, reported: not a crash (that would be rc 2 or a traceback)
    assert "Traceback" not in first.stderr
    assert "0 ok, 0 failed (scored 0), 2 errored" in first.stdout
    assert "errored: i0 [direct?max_tokens=24]: ModelServerError" in first.stderr
    assert "errored: i1 [direct?max_tokens=24]: ModelServerError" in first.stderr
    assert "2 record(s) of this selection are errored" in first.stderr and "--retry-errored" in first.stderr
    assert len(proxy.completions()) == 2 * 4  # each record: 1 attempt + 3 retries (the CLI's default)
    with Store(store) as s:
        runs = {r.instance_id: r for r in s.runs()}
        scores = list(s.scores())
    assert {i: r.status for i, r in runs.items()} == {"i0": "errored", "i1": "errored"}
    for r in runs.values():
        assert r.action is None and "server_error, HTTP 503" in (r.error or "") and "after 4 attempts" in (r.error or "")
    # unscored, not 0: the call_api record gets its slot scorer's record with score None
    assert scores and all(sc.score is None for sc in scores)
    assert {sc.run_key for sc in scores} == {runs["i1"].key}

    proxy.clear()
    proxy.reset_hits()
    second = _iba(*args, "--retry-errored", cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    assert "2 errored records retried" in second.stdout and "2 ok, 0 failed (scored 0), 0 errored" in second.stdout
    assert proxy.completions() and all(h.fault is None for h in proxy.completions())
    with Store(store) as s:
        runs = {r.instance_id: r for r in s.runs()}
        scores = {sc.run_key: sc for sc in s.scores()}
    assert {i: r.status for i, r in runs.items()} == {"i0": "ok", "i1": "ok"}
    assert runs["i0"].action.text and runs["i1"].action.params["texture"] in ("soft", "regular")
    assert scores[runs["i1"].key].score in (0.0, 1.0)  # now really scored
