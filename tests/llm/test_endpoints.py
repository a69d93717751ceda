"""Several endpoints per model (iba.llm.endpoints): choice, backoff, bounds, failover.

Unit tests of the pool use a fake clock and no server. The openai: backend is then tested over
real sockets: scripted servers and fault proxies on 127.0.0.1 (fast), and real llama_cpp.server
processes with SmolLM2 (slow): in-flight requests counted at a proxy in front of each server, a
server terminated in the middle of a batch, `iba run` with one of its two servers stopped.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from iba.llm import resolve_backend
from iba.llm.endpoints import _ROUND_OVER, EndpointPool, read_endpoints_file
from iba.llm.retry import ModelConnectionError, ModelRequestRejected, ModelServerError, RetryPolicy
from tests.conftest import _free_port, llama_server_process, stop_process
from tests.llm.fake_server import FakeOpenAIServer, Reply, chat_reply
from tests.llm.fault_proxy import Fault, FaultProxy

MSGS = [{"role": "user", "content": "Say hello."}]


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def _pool(n: int = 2, **kw) -> tuple[EndpointPool, Clock]:
    clock = Clock()
    return EndpointPool([f"http://127.0.0.1:{9000 + i}/v1" for i in range(n)], clock=clock, **kw), clock


def _names(eps) -> list[int]:
    return [e.index for e in eps]


# ---------------------------------------------------------------------- the pool, no server


def test_least_in_flight_with_round_robin_ties():
    pool, _ = _pool(3)
    taken = []
    for _ in range(4):  # all equal at each step: round-robin 0, 1, 2, then 0 again
        ep = pool.choose()
        pool._take(ep)
        taken.append(ep)
    assert _names(taken) == [0, 1, 2, 0]
    pool._release(taken[1])  # endpoint 1 now has the fewest in flight
    assert pool.choose().index == 1
    pool._release(taken[0])
    pool._release(taken[3])  # endpoint 0 at 0, 1 at 0, 2 at 1: tie 0/1 broken by rotation (after 0: 1)
    assert pool.choose().index == 1


def test_a_down_endpoint_is_skipped_backed_off_doubling_capped_and_reset_by_a_success():
    pool, clock = _pool(2, down_s=1.0, max_down_s=4.0)
    a, b = pool.endpoints
    downs = []
    for _ in range(4):
        pool.mark_down(a, "connection")
        downs.append(pool.down_for(a))
        assert pool.is_down(a) and pool.choose().index == 1  # never chosen while down
        clock.t += downs[-1]  # its period ends: up again, and the next failure doubles it
        assert not pool.is_down(a)
    assert downs == [1.0, 2.0, 4.0, 4.0]  # doubling, capped at max_down_s
    pool.mark_down(a, "connection")
    pool.mark_up(a)  # a success
    assert not pool.is_down(a) and a.consecutive_failures == 0
    pool.mark_down(a, "timeout")
    assert pool.down_for(a) == 1.0 and a.last_reason == "timeout" and not pool.is_down(b)


def test_failures_while_already_down_do_not_escalate_the_backoff():
    # a server that dies with 5 requests in flight sees 5 failures at once: one backoff step
    pool, clock = _pool(2, down_s=1.0)
    a = pool.endpoints[0]
    for _ in range(5):
        pool.mark_down(a, "connection")
    assert a.consecutive_failures == 1 and pool.down_for(a) == 1.0


def test_all_down_probes_one_endpoint_rotating_and_an_attempt_ends_after_each_up_endpoint_once():
    pool, clock = _pool(2, down_s=10.0)
    a, b = pool.endpoints
    pool.mark_down(a, "connection")
    clock.t += 1
    pool.mark_down(b, "connection")
    assert pool.choose() is a  # nothing up: probe the one whose backoff ends first
    clock.t += 0.5
    pool.mark_down(a, "connection")  # the probe failed: pushed out behind b
    assert pool.choose() is b
    # within one attempt a down endpoint is tried only if nothing was up: b tried, a down -> over
    clock.t += 100
    pool.mark_down(a, "connection")
    assert pool.choose(tried=[b]) is _ROUND_OVER
    clock.t += 100  # both up again: each is tried once per attempt
    assert pool.choose(tried=[a]) is b and pool.choose(tried=[a, b]) is _ROUND_OVER


async def test_run_fails_over_to_the_other_endpoint_and_marks_the_first_down():
    pool, _ = _pool(2)
    calls = []

    async def fn(ep):
        calls.append(ep.index)
        if ep.index == 0:
            raise ConnectionError("refused")
        return "ok"

    assert await pool.run(fn, failover=lambda e: "connection") == "ok"
    assert calls == [0, 1] and pool.is_down(pool.endpoints[0]) and not pool.is_down(pool.endpoints[1])
    calls.clear()
    assert await pool.run(fn, failover=lambda e: "connection") == "ok"
    assert calls == [1]  # the down endpoint is not tried again during its backoff
    assert pool.in_flight == 0 and [e.in_flight for e in pool.endpoints] == [0, 0]


async def test_run_raises_the_request_s_own_error_without_failover():
    pool, _ = _pool(2)
    calls = []

    async def fn(ep):
        calls.append(ep.index)
        raise ValueError("HTTP 400")

    with pytest.raises(ValueError, match="400"):
        await pool.run(fn, failover=lambda e: None)
    assert calls == [0] and not any(pool.is_down(e) for e in pool.endpoints)


async def test_run_raises_the_last_fault_once_every_up_endpoint_failed():
    pool, _ = _pool(3)
    calls = []

    async def fn(ep):
        calls.append(ep.index)
        raise ConnectionError(f"refused by {ep.index}")

    with pytest.raises(ConnectionError, match="refused by 2"):
        await pool.run(fn, failover=lambda e: "connection")
    assert sorted(calls) == [0, 1, 2]  # each once, then the attempt is over
    calls.clear()
    with pytest.raises(ConnectionError):
        await pool.run(fn, failover=lambda e: "connection")
    assert len(calls) == 1  # all down: one probe per attempt


async def test_in_flight_never_exceeds_the_bounds_and_waiters_proceed():
    pool, _ = _pool(2, max_in_flight_per_endpoint=2, max_in_flight=3)
    gate = asyncio.Event()
    now = {0: 0, 1: 0}
    peak = {0: 0, 1: 0, "all": 0}

    async def fn(ep):
        now[ep.index] += 1
        peak[ep.index] = max(peak[ep.index], now[ep.index])
        peak["all"] = max(peak["all"], now[0] + now[1])
        await gate.wait()
        await asyncio.sleep(0)
        now[ep.index] -= 1
        return ep.index

    tasks = [asyncio.create_task(pool.run(fn, failover=lambda e: None)) for _ in range(10)]
    for _ in range(5):
        await asyncio.sleep(0)
    assert pool.in_flight == 3 and now[0] + now[1] == 3  # 7 wait for a slot
    gate.set()
    done = await asyncio.gather(*tasks)
    assert sorted(set(done)) == [0, 1] and len(done) == 10
    assert peak["all"] == 3 and max(peak[0], peak[1]) == 2  # the bounds were reached, never passed
    assert pool.peak_in_flight == 3 and pool.in_flight == 0


async def test_a_request_cancelled_while_waiting_leaves_no_slot_taken():
    pool, _ = _pool(1, max_in_flight_per_endpoint=1)
    gate = asyncio.Event()

    async def fn(ep):
        await gate.wait()
        return "x"

    first = asyncio.create_task(pool.run(fn, failover=lambda e: None))
    await asyncio.sleep(0)
    waiting = asyncio.create_task(pool.run(fn, failover=lambda e: None))
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    gate.set()
    assert await first == "x" and pool.in_flight == 0 and pool._waiters == []


def test_the_pool_serves_several_event_loops():
    pool, _ = _pool(2, max_in_flight_per_endpoint=1)

    async def fn(ep):
        await asyncio.sleep(0.01)
        return ep.index

    async def batch():
        return await asyncio.gather(*(pool.run(fn, failover=lambda e: None) for _ in range(4)))

    assert sorted(asyncio.run(batch())) == [0, 0, 1, 1]
    assert sorted(asyncio.run(batch())) == [0, 0, 1, 1]  # a fresh loop: no stale waiters or counts


def test_bad_urls_and_duplicates_are_refused():
    with pytest.raises(ValueError, match="not an http"):
        EndpointPool(["127.0.0.1:8000/v1"])
    with pytest.raises(ValueError, match="given twice"):
        EndpointPool(["http://a:1/v1", "http://a:1/v1/"])
    with pytest.raises(ValueError, match="max_in_flight_per_endpoint must be >= 1"):
        EndpointPool(["http://a:1/v1"], max_in_flight_per_endpoint=0)


def test_endpoints_file_comments_and_a_bad_line_named_by_file_and_line(tmp_path):
    f = tmp_path / "endpoints.txt"
    f.write_text("# two vLLM replicas\nhttp://10.0.0.5:8000/v1\n\n  http://10.0.0.6:8000/v1  # the second\n")
    assert read_endpoints_file(f) == ["http://10.0.0.5:8000/v1", "http://10.0.0.6:8000/v1"]
    f.write_text("# replicas\nhttp://10.0.0.5:8000/v1\n10.0.0.6:8000\n")
    with pytest.raises(ValueError, match=rf"^{re.escape(str(f))}:3: '10.0.0.6:8000' is not an http"):
        read_endpoints_file(f)
    f.write_text("http://10.0.0.5:8000/v1\nhttp://10.0.0.5:8000/v1/\n")
    with pytest.raises(ValueError, match=rf"^{re.escape(str(f))}:2: .* already on line 1"):
        read_endpoints_file(f)
    f.write_text("# nothing yet\n")
    with pytest.raises(ValueError, match="no endpoint URLs"):
        read_endpoints_file(f)
    with pytest.raises(ValueError, match="no such endpoints file"):
        read_endpoints_file(tmp_path / "missing.txt")


# ---------------------------------------------------------------------- the backend, scripted servers


@pytest.fixture()
def _no_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # local servers need none


def _fast_retries(be, max_retries: int) -> None:
    be.retry_policy = RetryPolicy(max_retries=max_retries, base_delay=0.01, jitter=0.0)


async def test_one_or_several_urls_give_the_same_identity_and_cache_answers_across_replicas(_no_key, tmp_path):
    with FakeOpenAIServer([chat_reply("from a")]) as a, FakeOpenAIServer([chat_reply("from b")]) as b:
        both = resolve_backend("openai:m", base_url=[a.base_url, b.base_url], cache_dir=tmp_path)
        first = await both.complete(MSGS)
        only_b = resolve_backend("openai:m", base_url=b.base_url, cache_dir=tmp_path)
        again = await only_b.complete(MSGS)
    assert both.model_id == only_b.model_id == "openai:m" and both._identity == only_b._identity == "openai:m"
    assert first.text == "from a" and (again.text, again.cached) == ("from a", True)  # the replica's answer is reused
    assert len(a.requests) == 1 and b.requests == []


async def test_a_refused_endpoint_is_failed_over_without_using_the_retry_budget(_no_key):
    dead = f"http://127.0.0.1:{_free_port()}/v1"
    with FakeOpenAIServer([chat_reply("ok")]) as live:
        be = resolve_backend("openai:m", base_url=[dead, live.base_url], use_cache=False)
        _fast_retries(be, 0)  # no retries at all: the move to the live endpoint is free
        out = [await be.complete([{"role": "user", "content": f"q{i}"}]) for i in range(3)]
    assert [c.text for c in out] == ["ok"] * 3 and len(live.requests) == 3
    dead_ep = be.endpoints.endpoints[0]
    assert be.endpoints.is_down(dead) and dead_ep.sent == 1 and dead_ep.last_reason == "connection"


async def test_a_5xx_fails_over_but_a_4xx_is_not_sent_elsewhere(_no_key):
    with FakeOpenAIServer([Reply(503, {"error": {"message": "overloaded"}})]) as sick, \
         FakeOpenAIServer([chat_reply("ok")]) as well:
        be = resolve_backend("openai:m", base_url=[sick.base_url, well.base_url], use_cache=False)
        _fast_retries(be, 0)
        assert (await be.complete(MSGS)).text == "ok"
        assert len(sick.requests) == 1 and be.endpoints.is_down(sick.base_url)
    with FakeOpenAIServer([Reply(400, {"error": {"message": "bad request"}})]) as picky, \
         FakeOpenAIServer([chat_reply("ok")]) as other:
        be = resolve_backend("openai:m", base_url=[picky.base_url, other.base_url], use_cache=False)
        with pytest.raises(ModelRequestRejected, match="400"):
            await be.complete(MSGS)
        assert len(picky.requests) == 1 and other.requests == []  # the request's fault, not the server's
        assert not be.endpoints.is_down(picky.base_url)


async def test_all_endpoints_refusing_end_as_a_connection_error_after_bounded_attempts(_no_key):
    dead = [f"http://127.0.0.1:{_free_port()}/v1" for _ in range(2)]
    be = resolve_backend("openai:m", base_url=dead, use_cache=False)
    _fast_retries(be, 2)
    t0 = time.monotonic()
    with pytest.raises(ModelConnectionError) as ei:
        await be.complete(MSGS)
    msg = str(ei.value)
    # attempt 1 tries both endpoints, attempts 2 and 3 (all down) one probe each
    assert ei.value.attempts == 4 and "after 3 attempts (connection" in msg
    assert "4 requests over 2 endpoints" in msg and all(f"{d} down (last fault: connection)" in msg for d in dead)
    assert ei.value.__cause__ is None and ei.value.__context__ is None
    assert time.monotonic() - t0 < 10


async def test_all_endpoints_failing_5xx_counted_at_proxies_and_no_secret_in_the_error(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-TOPSECRET0123456789")
    # nothing behind the proxies: every request is answered 503 by the proxy itself
    with FaultProxy("http://127.0.0.1:9/v1") as p1, FaultProxy("http://127.0.0.1:9/v1") as p2:
        p1.always(Fault.http(503, echo_auth=True))
        p2.always(Fault.http(503, echo_auth=True))
        urls = [p1.base_url.replace("http://", "http://user:pw-SECRET@"), p2.base_url]
        be = resolve_backend("openai:m", base_url=urls, use_cache=False)
        _fast_retries(be, 3)
        with pytest.raises(ModelServerError) as ei:
            await be.complete(MSGS)
        hits = (len(p1.completions()), len(p2.completions()))
    msg = str(ei.value)
    assert hits == (3, 2) and ei.value.attempts == 5  # 2 + 1 + 1 + 1: probes alternate over the two
    assert "after 4 attempts (server_error, HTTP 503)" in msg and ei.value.status == 503
    assert "TOPSECRET" not in msg and "pw-SECRET" not in msg and p1.base_url in msg


def test_with_one_url_the_backend_behaves_as_before(_no_key):
    be = resolve_backend("openai:m", base_url="http://127.0.0.1:8080/v1", use_cache=False)
    assert be.base_url == "http://127.0.0.1:8080/v1" and be.base_urls == ("http://127.0.0.1:8080/v1",)
    assert len(be.endpoints) == 1 and be._identity == "openai:m"


# ---------------------------------------------------------------------- the CLI


def _run_args(*argv: str):
    import argparse

    from iba.commands import run as run_cmd

    p = argparse.ArgumentParser()
    run_cmd.add_arguments(p)
    return p.parse_args(["ds", *argv])


def test_repeated_base_url_makes_two_endpoints(_no_key):
    from iba.commands.model_options import backend_from_args

    args = _run_args("--model", "openai:m", "--base-url", "http://127.0.0.1:8001/v1",
                     "--base-url", "http://127.0.0.1:8002/v1", "--max-in-flight-per-endpoint", "3",
                     "--max-in-flight", "5")
    be = backend_from_args(args.model, args)
    assert be.base_urls == ("http://127.0.0.1:8001/v1", "http://127.0.0.1:8002/v1") and be.model_id == "openai:m"
    assert (be.endpoints.max_in_flight_per_endpoint, be.endpoints.max_in_flight) == (3, 5)
    one = backend_from_args("openai:m", _run_args("--model", "openai:m", "--base-url", "http://127.0.0.1:8001/v1"))
    assert one.base_urls == ("http://127.0.0.1:8001/v1",)


def test_endpoints_file_adds_urls_and_judges_can_have_their_own(_no_key, tmp_path):
    from iba.commands.model_options import backend_from_args
    from iba.commands.run import judge_backends

    f = tmp_path / "eps.txt"
    f.write_text("# replicas\nhttp://127.0.0.1:8002/v1\nhttp://127.0.0.1:8003/v1 # third\n")
    args = _run_args("--model", "openai:m", "--base-url", "http://127.0.0.1:8001/v1", "--endpoints", str(f))
    be = backend_from_args(args.model, args)
    assert len(be.endpoints) == 3 and be.base_urls[2] == "http://127.0.0.1:8003/v1"
    assert judge_backends("same", be, args) == [be]  # no --judge-base-url: the agent's backend judges
    args = _run_args("--model", "openai:m", "--endpoints", str(f), "--judge-base-url", "http://127.0.0.1:9001/v1",
                     "--judge-base-url", "http://127.0.0.1:9002/v1")
    be = backend_from_args(args.model, args)
    [same, other] = judge_backends("same,openai:judge", be, args)
    assert same is not be and same.model_id == "openai:m" and other.model_id == "openai:judge"
    assert same.base_urls == other.base_urls == ("http://127.0.0.1:9001/v1", "http://127.0.0.1:9002/v1")
    assert be.base_urls == ("http://127.0.0.1:8002/v1", "http://127.0.0.1:8003/v1")


def test_iba_run_with_a_bad_endpoints_file_names_file_and_line(_no_key, tmp_path, capsys):
    from iba.cli import main
    from tests.run.helpers import tiny_dataset

    ds = tiny_dataset(tmp_path / "ds")
    f = tmp_path / "eps.txt"
    f.write_text("http://127.0.0.1:8001/v1\n# a comment\nhttp//typo:8002/v1\n")
    rc = main(["run", str(ds), "--model", "openai:m", "--endpoints", str(f), "--judges", "none",
               "--store", str(tmp_path / "s.sqlite"), "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2 and f"error: {f}:3: 'http//typo:8002/v1' is not an http" in err
    assert not (tmp_path / "s.sqlite").exists()


def test_iba_score_accepts_several_judge_urls(_no_key):
    import argparse

    from iba.commands import score as score_cli
    from iba.commands.model_options import backend_from_args

    p = argparse.ArgumentParser()
    score_cli.add_arguments(p)
    args = p.parse_args(["store.sqlite", "--dataset", "ds", "--base-url", "http://127.0.0.1:8001/v1",
                         "--base-url", "http://127.0.0.1:8002/v1"])
    assert len(backend_from_args("openai:judge", args, judge=True).endpoints) == 2


# ---------------------------------------------------------------------- real servers (slow)


class InFlight:
    """Requests open at a proxy now, the most at once, and in all (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.now = self.peak = self.total = 0

    def enter(self) -> None:
        with self._lock:
            self.now += 1
            self.total += 1
            self.peak = max(self.peak, self.now)

    def leave(self) -> None:
        with self._lock:
            self.now -= 1


class CountingProxy(FaultProxy):
    """A FaultProxy that also counts chat-completion requests in flight, here and in `overall`.

    A request leaves the count just before its answer is written: the client can send its next
    request only after reading that answer, so the proxy never counts more than the client has
    in flight (a bound exceeded here was exceeded by the client).

    With `gate`, a chat request is counted, then held until the gate is set: a test can act on
    the upstream while requests are certainly in flight, instead of racing a fast server."""

    def __init__(self, upstream: str, overall: InFlight, gate: threading.Event | None = None) -> None:
        super().__init__(upstream)
        self.counter = InFlight()
        counters = (self.counter, overall)
        base = self._httpd.RequestHandlerClass

        class Counting(base):  # type: ignore[misc, valid-type]
            def _handle(self) -> None:
                self._open = self.command == "POST" and self.path.rstrip("/").endswith("/chat/completions")
                if self._open:
                    for c in counters:
                        c.enter()
                    if gate is not None:
                        gate.wait(60)
                try:
                    super()._handle()
                finally:
                    self._leave()

            def _reply(self, *args, **kw) -> None:
                self._leave()
                super()._reply(*args, **kw)

            def _leave(self) -> None:
                if getattr(self, "_open", False):
                    self._open = False
                    for c in counters:
                        c.leave()

        self._httpd.RequestHandlerClass = Counting


@contextmanager
def _server(gguf: Path, log_dir: Path) -> Iterator[tuple[subprocess.Popen, str]]:
    """A `python -m llama_cpp.server` with the tiny model on a free 127.0.0.1 port (tests/conftest.py)."""
    with llama_server_process(gguf, log_dir) as pair:
        yield pair


_stop = stop_process


@pytest.fixture(scope="module")
def second_server(smollm_gguf, tmp_path_factory) -> Iterator[str]:
    """A second server beside the session's `llama_server`, same model: two replicas."""
    with _server(smollm_gguf, tmp_path_factory.mktemp("second_server")) as (_, url):
        yield url


@pytest.fixture()
def stoppable_server(smollm_gguf, tmp_path) -> Iterator[subprocess.Popen]:
    """A server the test may terminate: yields the process, with its URL as `proc.url`."""
    with _server(smollm_gguf, tmp_path) as (proc, url):
        proc.url = url  # type: ignore[attr-defined]
        yield proc


def _prompt(i: int) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"Name one colour. ({i})"}]


@pytest.mark.slow
async def test_two_real_servers_share_8_requests_within_the_in_flight_bounds(_no_key, llama_server, second_server):
    overall = InFlight()
    with CountingProxy(llama_server, overall) as pa, CountingProxy(second_server, overall) as pb:
        be = resolve_backend("openai:smollm2-135m", base_url=[pa.base_url, pb.base_url], use_cache=False,
                             max_in_flight_per_endpoint=2, max_in_flight=3)
        out = await asyncio.gather(*(be.complete(_prompt(i), max_tokens=8) for i in range(8)))
        await be.aclose()
    assert all(c.text.strip() and c.completion_tokens > 0 for c in out)
    assert pa.counter.total >= 1 and pb.counter.total >= 1 and pa.counter.total + pb.counter.total == 8
    # counted at the servers' doors: the bounds held, and were reached (the requests really overlapped)
    assert pa.counter.peak <= 2 and pb.counter.peak <= 2 and overall.peak <= 3
    assert overall.peak == 3 and max(pa.counter.peak, pb.counter.peak) == 2


@pytest.mark.slow
async def test_a_server_terminated_mid_batch_moves_its_requests_to_the_other(_no_key, llama_server, stoppable_server):
    overall = InFlight()
    gate = threading.Event()  # the victim holds what it takes until its server is dead: no race with a fast server
    with CountingProxy(stoppable_server.url, overall, gate) as victim:
        be = resolve_backend("openai:smollm2-135m", base_url=[victim.base_url, llama_server], use_cache=False,
                             max_in_flight_per_endpoint=2, max_retries=0)  # no retries: only failover saves them
        be.endpoints.down_s = 60.0  # still down when the test looks
        killed_at: list[int] = []

        async def kill_when_busy() -> None:
            while victim.counter.now < 2:  # the victim holds its full share of the batch
                await asyncio.sleep(0.02)
            killed_at.append(victim.counter.total)
            await asyncio.to_thread(_stop, stoppable_server)
            gate.set()  # the held requests now reach a dead server

        killer = asyncio.create_task(kill_when_busy())
        out = await asyncio.gather(*(be.complete(_prompt(i), max_tokens=8) for i in range(10)))
        await killer
        await be.aclose()
    assert len(out) == 10 and all(c.text.strip() for c in out)  # none raised, every one answered
    assert stoppable_server.poll() is not None
    ep = be.endpoints.endpoints[0]
    assert be.endpoints.is_down(victim.base_url) and ep.last_reason == "connection" and ep.failed >= 1
    # after the kill only what was already on its way there reached it: the rest went to the other
    assert victim.counter.total <= killed_at[0] + 4


@pytest.mark.slow
def test_iba_run_with_one_of_two_servers_stopped_is_all_ok(_no_key, llama_server, stoppable_server, tmp_path):
    from iba.run.store import Store
    from tests.run.helpers import tiny_dataset

    _stop(stoppable_server)  # before the run: its port now refuses connections
    ds = tiny_dataset(tmp_path / "ds")
    store = tmp_path / "runs.sqlite"
    proc = subprocess.run(
        [sys.executable, "-m", "iba.cli", "run", str(ds), "--model", "openai:smollm2-135m",
         "--base-url", stoppable_server.url, "--base-url", llama_server, "--agent", "direct?max_tokens=16",
         "--judges", "none", "--store", str(store), "--no-cache", "--cache-dir", str(tmp_path / "cache"), "--quiet"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert "2 ok, 0 failed (scored 0), 0 errored" in proc.stdout
    assert f"endpoint {stoppable_server.url} down" in proc.stderr  # said once, with the public URL
    with Store(store) as s:
        runs = list(s.runs())
    assert sorted((r.instance_id, r.status, r.model) for r in runs) == [
        ("i0", "ok", "openai:smollm2-135m"), ("i1", "ok", "openai:smollm2-135m")]
    assert all("127.0.0.1" not in (r.model or "") for r in runs)
