"""The memory lifecycle protocol (iba.agents.memory) against real processes and a real HTTP server:
what is sent and in what order, the replies' checks, and the failure policy."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from iba.agents import sandbox as bwrap
from iba.agents.base import AgentError, AgentUnavailable
from iba.agents.command import ReplyTooLarge
from iba.agents.memory import MemoryAgent, parse_ack, parse_act, sessions_of
from iba.types import Turn
from tests.agents.helpers import API_TASK, env
from tests.agents.helpers import TEXT_TASK as _TEXT_TASK
from tests.fakes import ScriptedBackend

HERE = Path(__file__).resolve().parent
SCRIPTED = HERE / "scripted_memory.py"
needs_bwrap = pytest.mark.skipif(bwrap.unavailable() is not None, reason=f"bwrap cannot run here: {bwrap.unavailable()}")

# records every message it gets and answers act with them (and exits 0 at the end of stdin)
RECORDER = r"""
import json, sys
got = []
for line in sys.stdin:
    msg = json.loads(line)
    got.append(msg)
    if msg["type"] == "act":
        reply = {"kind": "generate", "text": json.dumps(got)}
    else:
        reply = {"ok": True, "usage": {"llm_calls": 1, "prompt_tokens": 10, "completion_tokens": 2}}
    print(json.dumps(reply), flush=True)
"""


TEXT_TASK = _TEXT_TASK.model_copy(update={"user_id": "u0"})


def _agent(tmp_path, **opts) -> MemoryAgent:
    return MemoryAgent(env(ScriptedBackend([]), tmp_path), **opts)


def _script(tmp_path, body: str) -> str:
    p = tmp_path / "memory.py"
    p.write_text(body)
    return f"python {p}"


def _history(user: str = "u0001", sessions: int = 3) -> list[Turn]:
    return [Turn(id=f"{user}-s{s}-t{t}", session_id=f"{user}-s{s}", timestamp=f"2025-01-0{s + 1}T10:00:0{t}",
                 role="user" if t == 0 else "assistant", text=f"session {s} turn {t}")
            for s in range(sessions) for t in range(2)]


async def _ingest_all(session, history):
    groups = sessions_of(history)
    acks = [await session.start()]
    for i, (sid, turns) in enumerate(groups):
        acks.append(await session.ingest(sid, turns, i, len(groups)))
    return acks


def test_sessions_are_runs_of_consecutive_turns():
    h = _history(sessions=3)
    assert [(sid, [t.id for t in turns]) for sid, turns in sessions_of(h)] == [
        (f"u0001-s{s}", [f"u0001-s{s}-t0", f"u0001-s{s}-t1"]) for s in range(3)]
    assert [sid for sid, _ in sessions_of(h[:2] + h[4:] + h[2:4])] == ["u0001-s0", "u0001-s2", "u0001-s1"]
    assert sessions_of([]) == []


@pytest.mark.parametrize("sandbox", [pytest.param("bwrap", marks=needs_bwrap), "none"])
async def test_the_protocol_over_cmd(tmp_path, sandbox):
    agent = _agent(tmp_path, cmd=_script(tmp_path, RECORDER), sandbox=sandbox)
    assert agent.sandbox == sandbox
    history = _history("u0")
    session = agent.session("u0", seed=43)
    acks = await _ingest_all(session, history)
    assert [a.usage.llm_calls for a in acks] == [1, 1, 1, 1]
    action = await session.act(TEXT_TASK, history)
    got = json.loads(action.text)
    # reset (with the protocol and the seed), one ingest per session in time order, then the task alone
    assert got[0] == {"type": "reset", "protocol": "iba-memory/1", "user_id": "u0", "seed": 43}
    ingests = got[1:4]
    assert [m["session_id"] for m in ingests] == ["u0-s0", "u0-s1", "u0-s2"]
    assert [(m["index"], m["sessions"]) for m in ingests] == [(0, 3), (1, 3), (2, 3)]
    assert ingests[1]["turns"] == [t.model_dump(mode="json") for t in history[2:4]]  # ids, timestamps, roles, text
    assert got[4] == {"type": "act", "user_id": "u0", "task": TEXT_TASK.model_dump(mode="json")}  # no history
    assert action.trace[0].step == "memory" and action.trace[0].outputs["sandbox"] == sandbox
    proc = session.proc
    await session.close()
    assert proc.returncode == 0  # `close`, then the end of stdin: it exited on its own, not killed
    assert session.workdir is None


async def test_act_usage_becomes_a_trace_step(tmp_path):
    session = _agent(tmp_path, cmd=f"python {SCRIPTED}").session("u0", seed=42)
    await _ingest_all(session, _history("u0"))
    action = await session.act(API_TASK.model_copy(update={"user_id": "u0"}), [])
    assert action.kind == "call_api" and set(action.params) == set(API_TASK.api_schema["properties"])
    usage_steps = [s for s in action.trace if s.step == "memory-act"]
    assert len(usage_steps) == 1 and (usage_steps[0].llm_calls, usage_steps[0].prompt_tokens) == (1, 11)
    state = next(s for s in action.trace if s.step == "memory-state").outputs
    assert state["sessions"] == 3 and state["turn_users"] == ["u0"] and state["users_reset"] == ["u0"]
    await session.close()


def test_replies_are_checked():
    assert parse_ack(b'{"ok": true}', "m").usage is None
    assert parse_ack(b'{"usage": {"llm_calls": 2, "prompt_tokens": 5, "completion_tokens": 1}}', "m").usage.llm_calls == 2
    with pytest.raises(AgentError, match="reported an error: disk full"):
        parse_ack(b'{"error": "disk full"}', "m")
    with pytest.raises(AgentUnavailable, match="reported a fault it could retry: model server down"):
        parse_ack(b'{"error": "model server down", "retryable": true}', "m")
    with pytest.raises(AgentUnavailable, match="reported a fault it could retry"):
        parse_act(b'{"error": "model server down", "retryable": true}', TEXT_TASK, "m")
    with pytest.raises(AgentError, match="reported an error: no idea") as e:
        parse_act(b'{"error": "no idea"}', TEXT_TASK, "m")
    assert not isinstance(e.value, AgentUnavailable)
    with pytest.raises(AgentError, match="invalid acknowledgement.*allowed fields: ok, usage, error, retryable"):
        parse_ack(b'{"status": "fine"}', "m")
    with pytest.raises(AgentError, match="did not reply with JSON"):
        parse_ack(b"yes", "m")
    with pytest.raises(AgentError, match="not a JSON object"):
        parse_ack(b"[1]", "m")
    with pytest.raises(AgentError, match="a call_api action to a generate task"):
        parse_act(b'{"kind": "call_api", "params": {}}', TEXT_TASK, "m")
    with pytest.raises(AgentError, match="valid Action"):
        parse_act(b'{"kind": "generate", "text": "x", "usage": {"tokens": 3}}', TEXT_TASK, "m")


@pytest.mark.parametrize("flag, error, match", [
    ("--crash-at", AgentError, r"exited with 3 ingesting session 2/3 \(u0-s1\); stderr: crashing at session 1"),
    ("--bad-ack-at", AgentError, "invalid acknowledgement"),
])
async def test_an_ingest_that_goes_wrong_is_the_memorys_failure(tmp_path, flag, error, match):
    session = _agent(tmp_path, cmd=f"python {SCRIPTED} {flag} 1").session("u0", seed=42)
    with pytest.raises(error, match=match) as e:
        await _ingest_all(session, _history("u0"))
    assert not isinstance(e.value, AgentUnavailable)  # failed (scored 0), not errored
    assert session.dead is not None
    with pytest.raises(AgentUnavailable, match="the session ended earlier"):
        await session.act(TEXT_TASK, [])
    await session.close()


async def test_a_hung_ingest_times_out_and_is_killed(tmp_path):
    session = _agent(tmp_path, cmd=f"python {SCRIPTED} --hang-at 0", ingest_timeout="1").session("u0", seed=42)
    with pytest.raises(AgentUnavailable, match="timed out after 1s ingesting session 1/3"):
        await _ingest_all(session, _history("u0"))
    proc = session.proc
    await session.close()
    assert proc.returncode == -signal.SIGKILL


async def test_a_memory_killed_from_outside_is_an_infrastructure_fault(tmp_path):
    session = _agent(tmp_path, cmd=f"python {SCRIPTED} --slow 3").session("u0", seed=42)
    await session.start()
    groups = sessions_of(_history("u0"))
    ingest = __import__("asyncio").ensure_future(session.ingest(groups[0][0], groups[0][1], 0, 3))
    await __import__("asyncio").sleep(0.5)
    os.killpg(session.proc.pid, signal.SIGKILL)  # as the OOM killer would
    with pytest.raises(AgentUnavailable, match="was killed by SIGKILL ingesting session 1/3"):
        await ingest
    await session.close()


async def test_a_reply_over_the_cap_fails_and_ends_the_session(tmp_path):
    big = RECORDER.replace('reply = {"kind": "generate", "text": json.dumps(got)}',
                           'reply = {"kind": "generate", "text": "x" * 3_000_000}')
    session = _agent(tmp_path, cmd=_script(tmp_path, big), max_reply_mb="1").session("u0", seed=42)
    await _ingest_all(session, _history("u0"))
    with pytest.raises(ReplyTooLarge, match="more than 1 MB"):
        await session.act(TEXT_TASK, [])
    assert session.dead is not None
    await session.close()


async def test_an_invalid_act_fails_that_task_only(tmp_path):
    session = _agent(tmp_path, cmd=f"python {SCRIPTED}").session("u0", seed=42)
    await _ingest_all(session, _history("u0"))
    wrong = TEXT_TASK.model_copy(update={"action": "call_api", "api_name": "x", "api_schema": {
        "type": "object", "properties": {"size": {"type": "string"}}, "required": ["size"]}})
    with pytest.raises(AgentError, match="do not match the API schema"):  # a string without enum: it sends nothing
        await session.act(wrong, [])
    assert session.dead is None
    assert (await session.act(TEXT_TASK, [])).kind == "generate"  # the same process answers the next task
    await session.close()


def test_options_are_checked(tmp_path):
    with pytest.raises(ValueError, match="exactly one of cmd"):
        _agent(tmp_path)
    with pytest.raises(ValueError, match="ingest_timeout=0: must be > 0"):
        _agent(tmp_path, cmd="python -c pass", ingest_timeout="0")
    with pytest.raises(ValueError, match="unknown option 'tools'"):
        _agent(tmp_path, url="http://127.0.0.1:9/m", tools="x")


async def test_act_outside_a_session_is_refused(tmp_path):
    with pytest.raises(AgentUnavailable, match="only `iba run`"):
        await _agent(tmp_path, url="http://127.0.0.1:9/m").act(TEXT_TASK, [])


# ---------------------------------------------------------------- url=

def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, timeout: float = 30.0) -> None:
    """Return once something listens on 127.0.0.1:`port`."""
    import socket

    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            assert time.monotonic() < deadline, f"nothing listens on {port}"
            time.sleep(0.1)


@pytest.fixture
def scripted_server():
    port = _free_port()
    proc = subprocess.Popen([sys.executable, str(SCRIPTED), "--serve", str(port)])
    wait_port(port)
    yield f"http://127.0.0.1:{port}/memory"
    proc.terminate()
    proc.wait(timeout=10)


async def test_the_protocol_over_url(tmp_path, scripted_server):
    agent = _agent(tmp_path, url=scripted_server)
    assert agent.sandbox is None
    a, b = agent.session("u0", seed=42), agent.session("u1", seed=42)
    await _ingest_all(a, _history("u0", sessions=2))
    await _ingest_all(b, _history("u1", sessions=3))
    state_a = next(s for s in (await a.act(TEXT_TASK, [])).trace if s.step == "memory-state").outputs
    task_b = TEXT_TASK.model_copy(update={"user_id": "u1"})
    state_b = next(s for s in (await b.act(task_b, [])).trace if s.step == "memory-state").outputs
    with pytest.raises(RuntimeError, match="sent to u0's memory session"):  # never across users
        await a.act(task_b, [])
    assert (state_a["sessions"], state_a["turn_users"]) == (2, ["u0"])
    assert (state_b["sessions"], state_b["turn_users"]) == (3, ["u1"])
    await a.close()
    await b.close()


async def test_url_paths_and_bodies(tmp_path):
    """Each message is POSTed to {url}/{type}, with the same JSON body a cmd= memory reads as a line."""
    seen: list[tuple[str, dict]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            msg = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append((self.path, msg))
            if msg["type"] == "act":
                body, status = b'{"kind": "generate", "text": "hi"}', 200
            elif msg["type"] == "ingest" and msg["index"] == 1:
                body, status = b'{"error": "overloaded"}', 503
            else:
                body, status = b'{"ok": true}', 200
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        session = _agent(tmp_path, url=f"http://127.0.0.1:{server.server_port}/m/").session("u0", seed=7)
        with pytest.raises(AgentUnavailable, match="answered HTTP 503.*overloaded"):  # a fault: errored
            await _ingest_all(session, _history("u0"))
        assert session.dead is not None
        await session.close()  # a dead session sends no close
        assert [p for p, _ in seen] == ["/m/reset", "/m/ingest", "/m/ingest"]
        assert seen[0][1] == {"type": "reset", "protocol": "iba-memory/1", "user_id": "u0", "seed": 7}
        seen.clear()
        session = _agent(tmp_path, url=f"http://127.0.0.1:{server.server_port}/m").session("u0", seed=7)
        await session.start()
        assert (await session.act(TEXT_TASK, [])).text == "hi"
        await session.close()
        assert [p for p, _ in seen] == ["/m/reset", "/m/act", "/m/close"]
        assert seen[2][1] == {"type": "close", "user_id": "u0"}
    finally:
        server.shutdown()
