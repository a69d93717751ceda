"""Run a third-party agent through a tiny JSON protocol (docs/external_agents.md).

    external?cmd=python examples/external_agent.py   one process per task: request JSON on stdin,
                                                      Action JSON on stdout
    external?url=http://127.0.0.1:8080/act            POST the request JSON, Action JSON back

Request: {"task": TaskView, "history": [Turn, ...]} (what every IBA agent sees, nothing more).
Reply: an Action ({"kind": "generate", "text": ...} or {"kind": "call_api", "params": {...}}, an
optional "trace"). A timeout, a non-zero exit, an HTTP error or a reply that is not a valid Action
errors the instance, with the tail of stderr (or the response body) in the message.

A command gets only what it needs (docs/external_agents.md, "What an external agent can see"): the
request on stdin, a private empty working directory (removed afterwards), no inherited file
descriptors beyond stdin/stdout/stderr, and IBA's environment without secrets (names such as
*_API_KEY, *_TOKEN, *_SECRET*, *PASSWORD*, credentials in URLs), without PWD/OLDPWD, and without
variables that point at a dataset directory. `pass_env=NAME,NAME` lets named variables through.
This stops accidental leaks, not a hostile agent: a process of the same user can still read the
filesystem and /proc; a separate user or a container is the real boundary.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import shutil
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from pydantic import Field, ValidationError, model_validator

from iba.agents.answer import check_task
from iba.agents.api_params import validate_params
from iba.agents.base import Agent, AgentEnv, AgentError, AgentUnavailable, parse_options
from iba.types import Action, Strict, TaskView, TraceStep, Turn

TAIL = 2000  # characters of stderr / body quoted in errors
ANSWER_KEY_FILE = "answer_key.jsonl"  # iba.dataset's hidden file; a variable pointing at its dir is dropped

# A name segment that marks a secret: OPENAI_API_KEY, HF_TOKEN, AWS_SECRET_ACCESS_KEY, SSH_AUTH_SOCK...
_SECRET_NAME = re.compile(r"(^|_)(API_?KEY|KEY|KEYS|TOKEN|SECRET|PASSWORD|PASSWD|PASS|PWD|CREDENTIALS?|AUTH)(_|$)", re.I)
_SECRET_NAMES = {"PGPASSWORD", "PASSWORD", "PWD", "OLDPWD", "_"}  # PWD/OLDPWD/_ : IBA's own cwd and command
_URL_CREDENTIALS = re.compile(r"://[^/\s:@]+:[^/\s@]+@")  # scheme://user:password@host


class ExternalOptions(Strict):
    cmd: str | None = None
    url: str | None = None
    timeout: float = Field(300.0, gt=0)
    pass_env: str = ""  # comma-separated names the command may inherit even though they look secret

    @model_validator(mode="after")
    def _one(self) -> ExternalOptions:
        if (self.cmd is None) == (self.url is None):
            raise ValueError("give exactly one of cmd=... or url=...")
        return self


def _points_at_dataset(value: str) -> bool:
    for part in value.split(os.pathsep):
        if part.startswith("/") and (Path(part).name == ANSWER_KEY_FILE or Path(part, ANSWER_KEY_FILE).is_file()):
            return True
    return False


def child_env(parent: Mapping[str, str], pass_env: set[str] = frozenset(), *, cwd: str) -> dict[str, str]:
    """The environment an external command gets: `parent` less secrets and pointers back to IBA's
    working directory or a dataset, plus the names in `pass_env` exactly as they are."""
    out: dict[str, str] = {}
    for name, value in parent.items():
        if name in pass_env:
            out[name] = value
        elif name.upper() in _SECRET_NAMES or _SECRET_NAME.search(name):
            continue
        elif _URL_CREDENTIALS.search(value) or _points_at_dataset(value):
            continue
        else:
            out[name] = value
    out["PWD"] = cwd  # shells and some libraries trust PWD over getcwd()
    return out


def child_argv(cmd: str, base: str) -> list[str]:
    """`cmd` split as a shell would, with relative paths that exist under `base` made absolute
    (the command runs in a fresh directory); "python" is this interpreter."""
    argv = shlex.split(cmd)
    out: list[str] = []
    for i, arg in enumerate(argv):
        if i == 0 and arg in ("python", "python3"):
            arg = sys.executable  # the same interpreter as IBA, whatever is on PATH
        elif not os.path.isabs(arg) and (i > 0 or os.sep in arg) and os.path.exists(os.path.join(base, arg)):
            arg = os.path.normpath(os.path.join(base, arg))  # normalised: "ds/../x" would name IBA's cwd
        out.append(arg)
    return out


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
        argv = child_argv(self.opts.cmd or "", os.getcwd())
        # A private, empty cwd: IBA may be running from the dataset directory itself.
        workdir = tempfile.mkdtemp(prefix="iba-agent-")  # mode 0700
        pass_env = {n.strip() for n in self.opts.pass_env.split(",") if n.strip()}
        try:
            try:
                proc = await asyncio.create_subprocess_exec(
                    *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                    cwd=workdir, env=child_env(os.environ, pass_env, cwd=workdir), close_fds=True,
                )
            except OSError as e:
                raise AgentUnavailable(f"cannot start external command {self.opts.cmd!r}: {e}") from None
            try:
                out, err = await asyncio.wait_for(proc.communicate(payload), self.opts.timeout)
            except TimeoutError:
                proc.kill()
                await proc.wait()
                raise AgentUnavailable(f"external command {self.opts.cmd!r} timed out after {self.opts.timeout:g}s") from None
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
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
