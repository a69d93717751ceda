"""Run a third-party agent through a tiny JSON protocol (docs/external_agents.md).

    external?cmd=python examples/external_agent.py   one process per task: request JSON on stdin,
                                                      Action JSON on stdout
    external?url=http://127.0.0.1:8080/act            POST the request JSON, Action JSON back

Request: {"task": TaskView, "history": [Turn, ...]} (what every IBA agent sees, nothing more).
Reply: an Action ({"kind": "generate", "text": ...} or {"kind": "call_api", "params": {...}}, an
optional "trace"). A timeout, a non-zero exit, an HTTP error or a reply that is not a valid Action
errors the instance, with the tail of stderr (or the response body) in the message.
"""

from __future__ import annotations

import asyncio
import json
import shlex
import sys
import time

from pydantic import Field, ValidationError, model_validator

from iba.agents.answer import check_task
from iba.agents.api_params import validate_params
from iba.agents.base import Agent, AgentEnv, AgentError, AgentUnavailable, parse_options
from iba.types import Action, Strict, TaskView, TraceStep, Turn

TAIL = 2000  # characters of stderr / body quoted in errors


class ExternalOptions(Strict):
    cmd: str | None = None
    url: str | None = None
    timeout: float = Field(300.0, gt=0)

    @model_validator(mode="after")
    def _one(self) -> ExternalOptions:
        if (self.cmd is None) == (self.url is None):
            raise ValueError("give exactly one of cmd=... or url=...")
        return self


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
    if action.kind != task.action:
        raise AgentError(f"{where} replied with a {action.kind} action to a {task.action} task")
    if action.kind == "call_api":
        try:
            params = validate_params(task.api_schema or {}, action.params)
        except ValueError as e:
            raise AgentError(f"{where} replied with params that do not match the API schema: {e}") from None
        action = action.model_copy(update={"params": params, "api_name": action.api_name or task.api_name})
    return action


class ExternalAgent(Agent):
    name = "external"

    def __init__(self, env: AgentEnv, **options: str) -> None:
        super().__init__(env, **options)
        self.opts: ExternalOptions = parse_options(ExternalOptions, options, self.name)

    async def act(self, task: TaskView, history: list[Turn]) -> Action:
        check_task(task)
        payload = request_json(task, history)
        start = time.perf_counter()
        if self.opts.cmd:
            raw, where = await self._run_command(payload), f"external command {self.opts.cmd!r}"
        else:
            raw, where = await self._post(payload), f"external agent at {self.opts.url}"
        action = parse_action(raw, task, where)
        step = TraceStep(
            step="external",
            inputs={"cmd": self.opts.cmd, "url": self.opts.url, "history_turns": len(history)},
            outputs={"reply_trace_steps": len(action.trace)},
            latency_s=round(time.perf_counter() - start, 4),
        )
        # the external agent's own steps (if it sent any) follow ours
        return action.model_copy(update={"trace": [step, *action.trace]})

    async def _run_command(self, payload: bytes) -> bytes:
        argv = shlex.split(self.opts.cmd or "")
        if argv and argv[0] in ("python", "python3"):
            argv[0] = sys.executable  # the same interpreter as IBA, whatever is on PATH
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
            )
        except OSError as e:
            raise AgentUnavailable(f"cannot start external command {self.opts.cmd!r}: {e}") from None
        try:
            out, err = await asyncio.wait_for(proc.communicate(payload), self.opts.timeout)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise AgentUnavailable(f"external command {self.opts.cmd!r} timed out after {self.opts.timeout:g}s") from None
        if proc.returncode != 0:
            tail = err.decode(errors="replace")[-TAIL:]
            raise AgentError(f"external command {self.opts.cmd!r} exited with {proc.returncode}; stderr: {tail}")
        return out

    async def _post(self, payload: bytes) -> bytes:
        import httpx

        try:
            async with httpx.AsyncClient(timeout=self.opts.timeout) as client:
                resp = await client.post(self.opts.url or "", content=payload, headers={"Content-Type": "application/json"})
        except httpx.TimeoutException:
            raise AgentUnavailable(f"external agent at {self.opts.url} timed out after {self.opts.timeout:g}s") from None
        except httpx.HTTPError as e:
            raise AgentUnavailable(f"external agent at {self.opts.url} unreachable: {e}") from None
        if resp.status_code >= 500:  # the agent's server failed: a fault, retried later
            raise AgentUnavailable(f"external agent at {self.opts.url} answered HTTP {resp.status_code}: {resp.text[-TAIL:]}")
        if resp.status_code != 200:
            raise AgentError(f"external agent at {self.opts.url} answered HTTP {resp.status_code}: {resp.text[-TAIL:]}")
        return resp.content
