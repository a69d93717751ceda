"""Memory systems through a lifecycle protocol (docs/memory_systems.md): ingest once, act many.

    memory?cmd=python examples/notes_memory.py   a new (sandboxed) process per user: JSON lines on
                                                  stdin, one JSON reply line each on stdout
    memory?url=http://127.0.0.1:8090/memory       a server you run: the same messages as POSTs to
                                                  {url}/reset, {url}/ingest, {url}/act, {url}/close

Per user (and trial), in this order: `reset` (a fresh state; for cmd= also a fresh process),
one `ingest` per session of the history in time order, one `act` per task of that user (the task
only: no history), then `close`. The runner (iba.run.memory_runner) drives a MemorySession per
user; this module holds the messages, the two transports and the reply checks. The sandbox, the
timeouts, the reply cap, the environment rules and the failure policy are `external`'s
(iba.agents.command); a process killed by a signal from outside (SIGKILL, SIGTERM, SIGINT,
SIGHUP: an OOM kill, an operator) is an infrastructure fault, any other death its own failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import signal
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence

from pydantic import Field, ValidationError

from iba.agents.answer import check_task
from iba.agents.base import AgentEnv, AgentError, AgentUnavailable
from iba.agents.command import (PIPE_GRACE_S, TAIL, Command, CommandAgent, CommandOptions, exit_of, kill_group,
                                post, too_large)
from iba.agents.external import check_action
from iba.types import Action, Strict, TaskView, TraceStep, Turn, Usage

log = logging.getLogger(__name__)

PROTOCOL = "iba-memory/1"
# a process that ends with one of these was stopped from outside (OOM killer, an operator, the
# machine going down): not the memory's own failure
KILLED_FROM_OUTSIDE = {-signal.SIGKILL, -signal.SIGTERM, -signal.SIGINT, -signal.SIGHUP}
CLOSE_GRACE_S = 5.0  # after `close`, how long the process may take to exit before it is killed
CLOSE_TIMEOUT_S = 60.0  # at most this long for the reply to `close` (every task was answered already)


class MemoryOptions(CommandOptions):
    # seconds one `ingest` message (one session) may take; `timeout` bounds reset, act and close
    ingest_timeout: float = Field(600.0, gt=0, allow_inf_nan=False)


class Ack(Strict):
    """The reply to reset, ingest and close. `usage`: what the message cost the memory (its own
    LLM calls and tokens), optional; `error`: the memory reports that it failed (its failure), or,
    with `retryable: true`, that something it depends on failed (a model server: a fault)."""

    ok: bool = True
    usage: Usage | None = None
    error: str | None = None
    retryable: bool = False


def _reported(value: dict, where: str) -> None:
    """Raise what an `error` reply says: a fault when `retryable`, else the memory's own failure."""
    if value.get("error") is not None:
        if value.get("retryable") is True:
            raise AgentUnavailable(f"{where} reported a fault it could retry: {value['error']}")
        raise AgentError(f"{where} reported an error: {value['error']}")


def sessions_of(history: Sequence[Turn]) -> list[tuple[str, list[Turn]]]:
    """The history as (session id, turns) in time order: each run of consecutive turns of one session."""
    out: list[tuple[str, list[Turn]]] = []
    for turn in history:
        if out and out[-1][0] == turn.session_id:
            out[-1][1].append(turn)
        else:
            out.append((turn.session_id, [turn]))
    return out


def reset_message(user_id: str, seed: int) -> dict:
    return {"type": "reset", "protocol": PROTOCOL, "user_id": user_id, "seed": seed}


def ingest_message(user_id: str, session_id: str, turns: Sequence[Turn], index: int, sessions: int) -> dict:
    return {"type": "ingest", "user_id": user_id, "session_id": session_id, "index": index, "sessions": sessions,
            "turns": [t.model_dump(mode="json") for t in turns]}


def act_message(task: TaskView) -> dict:
    return {"type": "act", "user_id": task.user_id, "task": task.model_dump(mode="json")}


def close_message(user_id: str) -> dict:
    return {"type": "close", "user_id": user_id}


def _json_object(raw: bytes, where: str) -> dict:
    text = raw.decode(errors="replace").strip()
    try:
        value = json.loads(text or "null")
    except json.JSONDecodeError as e:
        raise AgentError(f"{where} did not reply with JSON ({e.msg}); reply: {text[-TAIL:]!r}") from None
    if not isinstance(value, dict):
        raise AgentError(f"{where} replied with {type(value).__name__}, not a JSON object; reply: {text[-TAIL:]!r}")
    return value


def parse_ack(raw: bytes, where: str) -> Ack:
    """A reset/ingest/close reply; AgentError (the memory's failure) when it is not one or says it failed."""
    value = _json_object(raw, where)
    try:
        ack = Ack.model_validate(value)
    except ValidationError as e:
        err = e.errors()[0]
        field = ".".join(map(str, err["loc"]))
        raise AgentError(f"{where} replied with an invalid acknowledgement ({field}: {err['msg']}; allowed fields: "
                         f"{', '.join(Ack.model_fields)}); reply: {json.dumps(value)[-TAIL:]!r}") from None
    _reported(value, where)
    if not ack.ok:
        raise AgentError(f"{where} reported an error: ok: false")
    return ack


def parse_act(raw: bytes, task: TaskView, where: str) -> Action:
    """An act reply: an Action for `task` (as external's), with an optional `usage` that becomes a
    trace step, so the record's usage counts the memory's own calls."""
    value = _json_object(raw, where)
    _reported(value, where)
    usage = value.pop("usage", None)
    try:
        action = Action.model_validate(value)
        steps = [] if usage is None else [TraceStep(step="memory-act", **Usage.model_validate(usage).model_dump())]
    except (ValidationError, TypeError) as e:
        msg = e.errors()[0]["msg"] if isinstance(e, ValidationError) else str(e)
        raise AgentError(f"{where} did not reply with a valid Action JSON: {msg}; reply: {json.dumps(value)[-TAIL:]!r}") from None
    action = check_action(action, task, where)
    return action.model_copy(update={"trace": [*steps, *action.trace]})


class MemorySession(ABC):
    """One user's memory from `start` (a fresh state) to `close`. Messages go one at a time. After a
    failure mid-exchange the session is `dead`: what the memory holds is unknown, so nothing more is
    sent, and that user is ingested again from scratch by a later run."""

    def __init__(self, agent: MemoryAgent, user_id: str, seed: int) -> None:
        self.agent = agent
        self.user_id = user_id
        self.seed = seed
        self.sandbox = agent.sandbox  # RunRecord.sandbox of its acts
        self.dead: str | None = None  # why the session can no longer be used
        self._lock = asyncio.Lock()

    @property
    def where(self) -> str:
        return self.agent.where

    async def start(self) -> Ack:
        return await self._ack(reset_message(self.user_id, self.seed), self.agent.opts.timeout, "at reset")

    async def ingest(self, session_id: str, turns: Sequence[Turn], index: int, sessions: int) -> Ack:
        what = f"ingesting session {index + 1}/{sessions} ({session_id})"
        return await self._ack(ingest_message(self.user_id, session_id, turns, index, sessions),
                               self.agent.opts.ingest_timeout, what)

    async def act(self, task: TaskView, history: list[Turn] | None = None) -> Action:
        """The action for `task` (the runner's run_one calls this as it calls Agent.act; `history`
        is not sent: the memory has it already)."""
        check_task(task)
        if task.user_id != self.user_id:  # the runner's bug, never the memory's: it would cross users
            raise RuntimeError(f"task {task.instance_id} is {task.user_id}'s, sent to {self.user_id}'s memory session")
        start = time.perf_counter()
        raw = await self._send(act_message(task), self.agent.opts.timeout, f"acting on {task.instance_id}")
        action = parse_act(raw, task, self.where)
        step = TraceStep(step="memory", inputs={"cmd": self.agent.opts.cmd, "url": self.agent.opts.url},
                         outputs={"sandbox": self.sandbox, "reply_bytes": len(raw)},
                         latency_s=round(time.perf_counter() - start, 4))
        return action.model_copy(update={"trace": [step, *action.trace]})

    async def close(self) -> None:
        """Send `close` (a failure there is logged: every task was answered already) and free the state."""
        try:
            if self.dead is None:
                await self._ack(close_message(self.user_id), min(self.agent.opts.timeout, CLOSE_TIMEOUT_S), "at close")
        except AgentError as e:
            log.warning("warning: %s", e)
        finally:
            await self._release()

    async def _ack(self, message: dict, timeout: float, what: str) -> Ack:
        raw = await self._send(message, timeout, what)
        try:
            return parse_ack(raw, f"{self.where} ({what})")
        except AgentError as e:
            self.dead = str(e)  # e.g. an ingest it could not do: its memory is not the history's
            raise

    async def _send(self, message: dict, timeout: float, what: str) -> bytes:
        async with self._lock:
            if self.dead is not None:
                raise AgentUnavailable(f"{self.where}: not sent ({what}): the session ended earlier: {self.dead}")
            try:
                return await self._exchange(json.dumps(message, ensure_ascii=False).encode(), message["type"], timeout, what)
            except BaseException as e:
                if self._fatal(message["type"]):  # the memory is left in a state nobody knows
                    self.dead = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
                    await self._abandon()
                raise

    def _fatal(self, kind: str) -> bool:
        """Whether a failed exchange of this kind ends the session."""
        return True

    @abstractmethod
    async def _exchange(self, payload: bytes, kind: str, timeout: float, what: str) -> bytes:
        """Send one message, return its reply's bytes."""

    async def _abandon(self) -> None:
        """After a failed exchange: stop what can be stopped (the process)."""

    @abstractmethod
    async def _release(self) -> None:
        """After close (or death): free the process, its folder."""


class ProcessSession(MemorySession):
    """cmd=: a new process (in the sandbox) for this user; one JSON line each way per message. Any
    failed exchange ends it (a half-read reply or a timed-out one would answer the next message)."""

    proc: asyncio.subprocess.Process | None = None
    workdir: str | None = None

    async def start(self) -> Ack:
        command = self.agent.command
        assert command is not None
        # the stdout reader's line limit is the reply cap: a longer line is the memory's failure
        self.proc, self.workdir = await command.spawn(limit=self.agent.opts.cap)
        self._stderr = bytearray()
        self._stderr_task = asyncio.ensure_future(self._read_stderr())
        return await super().start()

    async def _read_stderr(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        while chunk := await self.proc.stderr.read(1 << 16):
            self._stderr.extend(chunk)
            del self._stderr[:-4 * TAIL]  # only the tail is ever quoted

    async def _exchange(self, payload: bytes, kind: str, timeout: float, what: str) -> bytes:
        proc = self.proc
        assert proc is not None and proc.stdin is not None and proc.stdout is not None
        try:
            async with asyncio.timeout(timeout):
                try:
                    proc.stdin.write(payload + b"\n")
                    await proc.stdin.drain()
                    line = await proc.stdout.readuntil(b"\n")
                except (asyncio.IncompleteReadError, BrokenPipeError, ConnectionResetError):
                    raise await self._ended(what) from None
                except (asyncio.LimitOverrunError, ValueError):  # the reply line passed the cap
                    raise too_large(f"{self.where} ({what})", self.agent.opts) from None
        except TimeoutError:
            raise AgentUnavailable(f"{self.where} timed out after {timeout:g}s {what}") from None
        return line

    async def _ended(self, what: str) -> AgentError:
        """The process closed its stdout (it exited): why, as the failure policy reads it."""
        proc = self.proc
        assert proc is not None and self.agent.command is not None
        try:
            await asyncio.wait_for(exit_of(proc), PIPE_GRACE_S)
        except TimeoutError:
            kill_group(proc)
            return AgentError(f"{self.where} closed its stdout {what} without replying; stderr: {self._tail()}")
        await asyncio.sleep(0.05)  # let the stderr reader take the last words
        code = proc.returncode or 0
        # sandboxed, bwrap's init reports a child killed by signal N as exit status 128 + N
        killed = -code if code < 0 else code - 128 if self.sandbox == "bwrap" and code > 128 else 0
        if -killed in KILLED_FROM_OUTSIDE:
            return AgentUnavailable(f"{self.where} was killed by {signal.Signals(killed).name} {what}; stderr: {self._tail()}")
        if code == 0:
            return AgentError(f"{self.where} exited {what} without replying; stderr: {self._tail()}")
        return self.agent.command.exit_error(code, self._tail(), during=f" {what}")

    def _tail(self) -> str:
        return bytes(getattr(self, "_stderr", b"")).decode(errors="replace")[-TAIL:]

    async def _abandon(self) -> None:
        if self.proc is not None:
            kill_group(self.proc)

    async def _release(self) -> None:
        proc = self.proc
        if proc is not None:
            if proc.stdin is not None and not proc.stdin.is_closing():
                proc.stdin.close()  # end of messages: a well-behaved memory exits now
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(exit_of(proc), CLOSE_GRACE_S)
            kill_group(proc)  # its children too
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(exit_of(proc), PIPE_GRACE_S)
            task = getattr(self, "_stderr_task", None)
            if task is not None:
                try:
                    await asyncio.wait_for(task, PIPE_GRACE_S)
                except (TimeoutError, Exception):
                    task.cancel()
        if self.workdir is not None:
            Command.cleanup(self.workdir)
            self.workdir = None


class HttpSession(MemorySession):
    """url=: POST {url}/{type} with the message as the JSON body; the reply is the 200 body."""

    def _fatal(self, kind: str) -> bool:
        return kind != "act"  # a failed act leaves the server's memory as it was; a failed ingest does not

    async def _exchange(self, payload: bytes, kind: str, timeout: float, what: str) -> bytes:
        url = f"{(self.agent.opts.url or '').rstrip('/')}/{kind}"
        return await post(url, payload, self.agent.opts, f"{self.where} ({what})", timeout=timeout)

    async def _release(self) -> None:
        return None


class MemoryAgent(CommandAgent):
    """A memory system: the runner opens a session per user (`session`) instead of calling `act`."""

    name = "memory"
    per_user = True  # iba.run.memory_runner schedules it user by user
    uses_model = False  # it calls its own models: --model is not what it runs on
    options_model = MemoryOptions
    opts: MemoryOptions

    def __init__(self, env: AgentEnv, /, **options: str) -> None:
        super().__init__(env, **options)
        self.where = self.command.where if self.command is not None else f"memory server at {self.opts.url}"

    def session(self, user_id: str, seed: int) -> MemorySession:
        """A new session for `user_id` (not started)."""
        cls = ProcessSession if self.command is not None else HttpSession
        return cls(self, user_id, seed)

    async def act(self, task: TaskView, history: list[Turn]) -> Action:
        raise AgentUnavailable("a memory agent ingests each user's history once and then acts on that user's "
                               "tasks; only `iba run` (local executor) drives it (docs/memory_systems.md)")
