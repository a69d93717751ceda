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

A command runs in a bubblewrap sandbox (iba.agents.sandbox; sandbox=auto|bwrap|none): its own
user, PID, IPC and network namespaces, no view of iba's processes, read-only binds of only its own
files and interpreter, a private writable directory, and a clean environment (env=NAME,... passes
named variables). It leads its own session: a timeout, a cap, its exit or a cancelled run kills
the whole process group (and, sandboxed, everything in its PID namespace). Where bwrap cannot
run, sandbox=auto falls back to the older accident-prevention (private cwd, secrets and dataset
pointers dropped from the inherited environment), says so once, and its records are marked
sandbox="none" so reports can mark the rows unsandboxed.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import shlex
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, model_validator

from iba.agents import sandbox
from iba.agents.answer import check_task
from iba.agents.api_params import validate_params
from iba.agents.base import Agent, AgentEnv, AgentError, AgentUnavailable, parse_options
from iba.types import Action, Strict, TaskView, TraceStep, Turn

log = logging.getLogger(__name__)

TAIL = 2000  # characters of stderr / body quoted in errors
PIPE_GRACE_S = 2.0  # after the kill, how long the pipes may take to close
ANSWER_KEY_FILE = "answer_key.jsonl"  # iba.dataset's hidden file; a variable pointing at its dir is dropped

# A name segment that marks a secret: OPENAI_API_KEY, HF_TOKEN, AWS_SECRET_ACCESS_KEY, SSH_AUTH_SOCK...
_SECRET_NAME = re.compile(r"(^|_)(API_?KEY|KEY|KEYS|TOKEN|SECRET|PASSWORD|PASSWD|PASS|PWD|CREDENTIALS?|AUTH)(_|$)", re.I)
_SECRET_NAMES = {"PGPASSWORD", "PASSWORD", "PWD", "OLDPWD", "_"}  # PWD/OLDPWD/_ : IBA's own cwd and command
_URL_CREDENTIALS = re.compile(r"://[^/\s:@]+:[^/\s@]+@")  # scheme://user:password@host


class ExternalOptions(Strict):
    cmd: str | None = None
    url: str | None = None
    timeout: float = Field(300.0, gt=0, allow_inf_nan=False)
    # cmd= only. auto: bwrap where it can run, else unsandboxed (said once, rows marked in reports);
    # bwrap: bwrap or nothing (the run stops if it cannot); none: unsandboxed on purpose
    sandbox: Literal["auto", "bwrap", "none"] = "auto"
    network: bool = False  # sandboxed: share iba's network (default: none, not even the host's 127.0.0.1)
    env: str = ""  # comma-separated names of iba's variables the command gets (secret-looking ones too)
    pass_env: str = ""  # the older name of env=
    ro: str = ""  # sandboxed: more paths (comma-separated) the command may read
    # a reply (stdout or HTTP body) over this many megabytes fails the record and is not stored
    max_reply_mb: float = Field(4.0, gt=0, allow_inf_nan=False)

    @model_validator(mode="after")
    def _one(self) -> ExternalOptions:
        if (self.cmd is None) == (self.url is None):
            raise ValueError("give exactly one of cmd=... or url=...")
        if self.url is not None and (self.sandbox == "bwrap" or self.network or self.ro):
            raise ValueError("sandbox=bwrap, network= and ro= apply to cmd= agents (iba does not start a url= agent)")
        return self

    def names(self) -> list[str]:
        return [n.strip() for n in f"{self.env},{self.pass_env}".split(",") if n.strip()]


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


class ReplyTooLarge(AgentError):
    """The agent's reply passed max_reply_mb: its failure, and nothing of the reply is stored."""


_NOTED: set[str] = set()  # notes said once per process (one run), however many agents are built


def _note_once(message: str) -> None:
    if message not in _NOTED:
        _NOTED.add(message)
        log.warning("note: %s", message)


async def _exit_of(proc: asyncio.subprocess.Process) -> None:
    """Return once the command itself has exited. Not Process.wait(): on Python 3.11 that also
    waits for its pipes to close, which a child it left behind holding stdout delays forever;
    the return code is set as soon as the command exits."""
    while proc.returncode is None:
        await asyncio.sleep(0.02)


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    """SIGKILL the command's whole process group (it leads its own session): the children and
    grandchildren it started die with it, and none keeps our pipes open."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass  # the group is gone already


class ExternalAgent(Agent):
    name = "external"
    uses_model = False  # a third-party program with its own model: --model is not what it runs on

    def __init__(self, env: AgentEnv, /, **options: str) -> None:
        super().__init__(env, **options)
        self.opts: ExternalOptions = parse_options(ExternalOptions, options, self.name)
        # "bwrap" or "none" for a command iba starts (RunRecord.sandbox); None for a url= agent
        self.sandbox: str | None = None
        self._argv: list[str] = []
        self._binds: list[str] = []
        if self.opts.cmd is not None:
            self._setup_command()
        self.hide(())  # a folder holding a dataset's hidden files is refused even when no path is named

    def hide(self, paths: Sequence[str]) -> None:
        if self.sandbox == "bwrap":
            try:
                sandbox.check_binds(self._binds, paths)
            except sandbox.SandboxError as e:
                raise ValueError(f"agent external: {e}") from None

    def _setup_command(self) -> None:
        try:
            argv = child_argv(self.opts.cmd or "", os.getcwd())
        except ValueError as e:  # unbalanced quotes
            raise ValueError(f"agent external: option cmd={self.opts.cmd}: {e}") from None
        if not argv:
            raise ValueError("agent external: option cmd= is empty")
        self._argv = argv
        why_not = None if self.opts.sandbox == "none" else sandbox.unavailable()
        if self.opts.sandbox == "bwrap" and why_not:
            raise ValueError(f"agent external: sandbox=bwrap: {why_not}")
        if self.opts.sandbox == "none" or why_not:
            self.sandbox = "none"
            why = "sandbox=none" if self.opts.sandbox == "none" else why_not
            _note_once(f"external agent {self.opts.cmd!r} runs UNSANDBOXED ({why}): it can read whatever this "
                       "user can, the answer key and iba's /proc included; its rows are marked unsandboxed")
            return
        self.sandbox = "bwrap"
        exe = shutil.which(argv[0]) if os.sep not in argv[0] else os.path.abspath(argv[0])
        if exe:
            self._argv = [exe, *argv[1:]]
        extra = [p.strip() for p in self.opts.ro.split(",") if p.strip()]
        missing = [p for p in extra if not os.path.exists(p)]
        if missing:
            raise ValueError(f"agent external: option ro={self.opts.ro}: {missing[0]} does not exist")
        self._binds = sandbox.command_paths(self._argv, extra)

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
            outputs={"reply_trace_steps": len(action.trace), "sandbox": self.sandbox, "reply_bytes": len(raw)},
            latency_s=round(time.perf_counter() - start, 4),
        )
        # the external agent's own steps (if it sent any) follow ours
        return action.model_copy(update={"trace": [step, *action.trace]})

    @property
    def _cap(self) -> int:
        return int(self.opts.max_reply_mb * 1_000_000)

    def _too_large(self, where: str) -> ReplyTooLarge:
        return ReplyTooLarge(f"{where} replied with more than {self.opts.max_reply_mb:g} MB "
                             f"(max_reply_mb={self.opts.max_reply_mb:g}); the reply was not stored")

    async def _run_command(self, payload: bytes) -> bytes:
        # A private, empty cwd: IBA may be running from the dataset directory itself.
        workdir = tempfile.mkdtemp(prefix="iba-agent-")  # mode 0700
        names = self.opts.names()
        fds: tuple[int, ...] = ()
        try:
            if self.sandbox == "bwrap":
                if not os.path.isabs(self._argv[0]):
                    raise AgentUnavailable(f"cannot start external command {self.opts.cmd!r}: "
                                           f"{self._argv[0]!r} is not on PATH")
                args = sandbox.bwrap_arguments(self._argv, workdir=workdir, binds=self._binds, network=self.opts.network)
                fds = (sandbox.args_fd(args),)
                argv = [sandbox.bwrap_binary() or "bwrap", "--args", str(fds[0]), *self._argv]
                env = sandbox.sandbox_env(os.environ, names, self._argv[0])
            else:
                argv = self._argv
                env = child_env(os.environ, set(names), cwd=workdir)
            try:
                proc = await asyncio.create_subprocess_exec(
                    *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                    cwd=workdir, env=env, close_fds=True, pass_fds=fds, start_new_session=True,
                )
            except OSError as e:
                raise AgentUnavailable(f"cannot start external command {self.opts.cmd!r}: {e}") from None
            finally:
                for fd in fds:
                    os.close(fd)
            out, err = await self._exchange(proc, payload)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        tail = err.decode(errors="replace")[-TAIL:]
        if proc.returncode != 0:
            if self.sandbox == "bwrap" and proc.returncode == 1 and tail.startswith("bwrap:"):
                raise AgentUnavailable(f"external command {self.opts.cmd!r}: the sandbox could not start it: {tail.strip()}")
            raise AgentError(f"external command {self.opts.cmd!r} exited with {proc.returncode}; stderr: {tail}")
        return out

    async def _exchange(self, proc: asyncio.subprocess.Process, payload: bytes) -> tuple[bytes, bytes]:
        """Send the request, collect stdout (up to the cap) and stderr's tail until the command
        exits; then kill its process group, whatever happened (exit, timeout, cap, cancellation)."""
        where = f"external command {self.opts.cmd!r}"
        out, err = bytearray(), bytearray()
        cap = self._cap
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
                    _kill_group(proc)  # no use waiting for the rest

        async def read_err() -> None:
            while chunk := await proc.stderr.read(1 << 16):  # type: ignore[union-attr]
                err.extend(chunk)
                del err[:-4 * TAIL]  # only the tail is ever quoted

        tasks = [asyncio.ensure_future(f()) for f in (feed, read_out, read_err)]
        waiter = asyncio.ensure_future(_exit_of(proc))
        try:
            try:
                async with asyncio.timeout(self.opts.timeout):
                    await waiter  # the reply ends when the command exits (or is killed for its size)
            except TimeoutError:
                raise AgentUnavailable(f"{where} timed out after {self.opts.timeout:g}s") from None
        finally:
            _kill_group(proc)  # its children too: none outlives the call or holds our pipes
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
                await asyncio.wait_for(_exit_of(proc), PIPE_GRACE_S)
        if over:
            raise self._too_large(where)
        return bytes(out), bytes(err)

    async def _post(self, payload: bytes) -> bytes:
        import httpx

        where = f"external agent at {self.opts.url}"
        cap = self._cap
        try:
            async with httpx.AsyncClient(timeout=self.opts.timeout) as client:
                async with client.stream("POST", self.opts.url or "", content=payload,
                                         headers={"Content-Type": "application/json"}) as resp:
                    body = bytearray()
                    async for chunk in resp.aiter_bytes():
                        body.extend(chunk)
                        if len(body) > cap:
                            raise self._too_large(where)
        except httpx.TimeoutException:
            raise AgentUnavailable(f"{where} timed out after {self.opts.timeout:g}s") from None
        except httpx.HTTPError as e:
            raise AgentUnavailable(f"{where} unreachable: {e}") from None
        text = body.decode(errors="replace")
        if resp.status_code >= 500:  # the agent's server failed: a fault, retried later
            raise AgentUnavailable(f"{where} answered HTTP {resp.status_code}: {text[-TAIL:]}")
        if resp.status_code != 200:
            raise AgentError(f"{where} answered HTTP {resp.status_code}: {text[-TAIL:]}")
        return bytes(body)
