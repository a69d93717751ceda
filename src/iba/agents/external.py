"""Run a third-party agent through a tiny JSON protocol (docs/external_agents.md).

    external?cmd=python examples/external_agent.py   one process per task: request JSON on stdin,
                                                      Action JSON on stdout
    external?url=http://127.0.0.1:8080/act            POST the request JSON, Action JSON back

Request: {"task": TaskView, "history": [Turn, ...]} (what every IBA agent sees, nothing more).
Reply: an Action ({"kind": "generate", "text": ...} or {"kind": "call_api", "params": {...}}, an
optional "trace"). A non-zero exit, an HTTP 4xx, a reply over max_reply_mb or one that is not a
valid Action fails the instance (the agent's failure, scored 0); a command that cannot start, a
timeout, an unreachable URL or an HTTP 5xx errors it (infrastructure), with the tail of stderr (or
the response body) in the message.

The command's sandbox, start, kill and the HTTP POST are iba.agents.command's, shared with the
memory agents (iba.agents.memory).
"""

from __future__ import annotations

import asyncio
import json
import time

from pydantic import ValidationError

from iba.agents.answer import check_task
from iba.agents.api_params import validate_params
from iba.agents.base import AgentError, AgentUnavailable
from iba.agents.command import (  # noqa: F401 - child_env, child_argv: imported from here too
    PIPE_GRACE_S,
    TAIL,
    CommandAgent,
    CommandOptions,
    child_argv,
    child_env,
    exit_of,
    kill_group,
    post,
    too_large,
)
from iba.types import Action, TaskView, TraceStep, Turn


def request_json(task: TaskView, history: list[Turn]) -> bytes:
    return json.dumps(
        {"task": task.model_dump(mode="json"), "history": [t.model_dump(mode="json") for t in history]},
        ensure_ascii=False,
    ).encode()


def parse_action(raw: bytes | str, task: TaskView, where: str) -> Action:
    """Validate an external reply as an Action for `task` (kind must match; params against the schema)."""
    text = raw.decode(errors="replace") if isinstance(raw, bytes) else raw
    try:
        action = Action.model_validate_json(text.strip() or "null")
    except ValidationError as e:
        raise AgentError(f"{where} did not reply with a valid Action JSON: {e.errors()[0]['msg']}; reply: {text[-TAIL:]!r}") from None
    return check_action(action, task, where)


def check_action(action: Action, task: TaskView, where: str) -> Action:
    """`action` as the answer to `task`: its kind must match, params must satisfy the API schema."""
    if action.kind != task.action:
        raise AgentError(f"{where} replied with a {action.kind} action to a {task.action} task")
    if action.kind == "call_api":
        try:
            params = validate_params(task.api_schema or {}, action.params)
        except ValueError as e:
            raise AgentError(f"{where} replied with params that do not match the API schema: {e}") from None
        action = action.model_copy(update={"params": params, "api_name": action.api_name or task.api_name})
    return action


class ExternalAgent(CommandAgent):
    name = "external"
    uses_model = False  # a third-party program with its own model: --model is not what it runs on
    options_model = CommandOptions
    opts: CommandOptions

    async def act(self, task: TaskView, history: list[Turn]) -> Action:
        check_task(task)
        payload = request_json(task, history)
        start = time.perf_counter()
        if self.command is not None:
            raw, where = await self._run_command(payload), self.command.where
        else:
            where = f"external agent at {self.opts.url}"
            raw = await post(self.opts.url or "", payload, self.opts, where)
        action = parse_action(raw, task, where)
        step = TraceStep(
            step="external",
            inputs={"cmd": self.opts.cmd, "url": self.opts.url, "history_turns": len(history)},
            outputs={"reply_trace_steps": len(action.trace), "sandbox": self.sandbox, "reply_bytes": len(raw)},
            latency_s=round(time.perf_counter() - start, 4),
        )
        # the external agent's own steps (if it sent any) follow ours
        return action.model_copy(update={"trace": [step, *action.trace]})

    async def _run_command(self, payload: bytes) -> bytes:
        assert self.command is not None
        proc, workdir = await self.command.spawn()
        try:
            out, err = await self._exchange(proc, payload)
        finally:
            self.command.cleanup(workdir)
        if proc.returncode != 0:
            raise self.command.exit_error(proc.returncode or 0, err.decode(errors="replace")[-TAIL:])
        return out

    async def _exchange(self, proc: asyncio.subprocess.Process, payload: bytes) -> tuple[bytes, bytes]:
        """Send the request, collect stdout (up to the cap) and stderr's tail until the command
        exits; then kill its process group, whatever happened (exit, timeout, cap, cancellation)."""
        where = self.command.where if self.command else ""
        out, err = bytearray(), bytearray()
        cap = self.opts.cap
        over = False
        assert proc.stdin and proc.stdout and proc.stderr

        async def feed() -> None:
            try:
                proc.stdin.write(payload)  # type: ignore[union-attr]
                await proc.stdin.drain()  # type: ignore[union-attr]
            except (BrokenPipeError, ConnectionResetError):
                pass  # it stopped reading: its exit status or reply says why
            finally:
                proc.stdin.close()  # type: ignore[union-attr]

        async def read_out() -> None:
            nonlocal over
            while chunk := await proc.stdout.read(1 << 16):  # type: ignore[union-attr]
                if over:
                    continue  # read to the end (the pipe closes as the group dies), keep nothing
                out.extend(chunk)
                if len(out) > cap:
                    over = True
                    out.clear()
                    kill_group(proc)  # no use waiting for the rest

        async def read_err() -> None:
            while chunk := await proc.stderr.read(1 << 16):  # type: ignore[union-attr]
                err.extend(chunk)
                del err[:-4 * TAIL]  # only the tail is ever quoted

        tasks = [asyncio.ensure_future(f()) for f in (feed, read_out, read_err)]
        waiter = asyncio.ensure_future(exit_of(proc))
        try:
            try:
                async with asyncio.timeout(self.opts.timeout):
                    await waiter  # the reply ends when the command exits (or is killed for its size)
            except TimeoutError:
                raise AgentUnavailable(f"{where} timed out after {self.opts.timeout:g}s") from None
        finally:
            kill_group(proc)  # its children too: none outlives the call or holds our pipes
            if not waiter.done():
                waiter.cancel()
            # the pipes close once the group is dead; a process that left the group (setsid) and
            # kept them open is not waited for
            done, pending = await asyncio.wait(tasks, timeout=PIPE_GRACE_S)
            for t in pending:
                t.cancel()
            for t in done:
                if not t.cancelled():
                    t.exception()  # retrieved: a broken pipe after the kill is no news
            if proc.returncode is None:  # killed above: its status follows at once
                await asyncio.wait_for(exit_of(proc), PIPE_GRACE_S)
        if over:
            raise too_large(where, self.opts)
        return bytes(out), bytes(err)
