"""What every third-party agent iba talks to shares (external and memory agents): the options, the
command iba starts (sandbox set-up, start, exit status, kill) and the HTTP POST with its caps.

A command runs in a bubblewrap sandbox (iba.agents.sandbox; sandbox=auto|bwrap|none): its own
user, PID, IPC and network namespaces, no view of iba's processes, read-only binds of only its own
files and interpreter, a private writable directory, and a clean environment (env=NAME,... passes
named variables). It leads its own session: a timeout, a cap, its exit or a cancelled run kills
the whole process group (and, sandboxed, everything in its PID namespace). Where bwrap cannot
run, sandbox=auto falls back to the older accident-prevention (private cwd, secrets and dataset
pointers dropped from the inherited environment), says so once, and its records are marked
sandbox="none" so reports can mark the rows unsandboxed.

Failure policy (README, "What counts as a failure"): what the agent did (a non-zero exit, an HTTP
4xx, a reply over max_reply_mb or not valid) is its failure (AgentError); what kept it from
answering (cannot start, a timeout, unreachable, HTTP 5xx) is the infrastructure's (AgentUnavailable).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import shlex
import shutil
import signal
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from iba.agents import sandbox
from iba.agents.base import Agent, AgentEnv, AgentError, AgentUnavailable
from iba.types import Strict

log = logging.getLogger(__name__)

TAIL = 2000  # characters of stderr / body quoted in errors
PIPE_GRACE_S = 2.0  # after the kill, how long the pipes may take to close
ANSWER_KEY_FILE = "answer_key.jsonl"  # iba.dataset's hidden file; a variable pointing at its dir is dropped

# A name segment that marks a secret: OPENAI_API_KEY, HF_TOKEN, AWS_SECRET_ACCESS_KEY, SSH_AUTH_SOCK...
_SECRET_NAME = re.compile(r"(^|_)(API_?KEY|KEY|KEYS|TOKEN|SECRET|PASSWORD|PASSWD|PASS|PWD|CREDENTIALS?|AUTH)(_|$)", re.I)
_SECRET_NAMES = {"PGPASSWORD", "PASSWORD", "PWD", "OLDPWD", "_"}  # PWD/OLDPWD/_ : IBA's own cwd and command
_URL_CREDENTIALS = re.compile(r"://[^/\s:@]+:[^/\s@]+@")  # scheme://user:password@host


class CommandOptions(Strict):
    """The options of an agent iba starts (cmd=) or calls (url=)."""

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
    def _one(self) -> CommandOptions:
        if (self.cmd is None) == (self.url is None):
            raise ValueError("give exactly one of cmd=... or url=...")
        if self.url is not None and (self.sandbox == "bwrap" or self.network or self.ro):
            raise ValueError("sandbox=bwrap, network= and ro= apply to cmd= agents (iba does not start a url= agent)")
        return self

    def names(self) -> list[str]:
        return [n.strip() for n in f"{self.env},{self.pass_env}".split(",") if n.strip()]

    @property
    def cap(self) -> int:
        """max_reply_mb in bytes."""
        return int(self.max_reply_mb * 1_000_000)


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


class ReplyTooLarge(AgentError):
    """The agent's reply passed max_reply_mb: its failure, and nothing of the reply is stored."""


def too_large(where: str, opts: CommandOptions) -> ReplyTooLarge:
    return ReplyTooLarge(f"{where} replied with more than {opts.max_reply_mb:g} MB "
                         f"(max_reply_mb={opts.max_reply_mb:g}); the reply was not stored")


_NOTED: set[str] = set()  # notes said once per process (one run), however many agents are built


def note_once(message: str) -> None:
    if message not in _NOTED:
        _NOTED.add(message)
        log.warning("note: %s", message)


async def exit_of(proc: asyncio.subprocess.Process) -> None:
    """Return once the command itself has exited. Not Process.wait(): on Python 3.11 that also
    waits for its pipes to close, which a child it left behind holding stdout delays forever;
    the return code is set as soon as the command exits."""
    while proc.returncode is None:
        await asyncio.sleep(0.02)


def kill_group(proc: asyncio.subprocess.Process) -> None:
    """SIGKILL the command's whole process group (it leads its own session): the children and
    grandchildren it started die with it, and none keeps our pipes open."""
    with contextlib.suppress(ProcessLookupError, PermissionError):  # the group is gone already
        os.killpg(proc.pid, signal.SIGKILL)


class Command:
    """The command of a cmd= agent, resolved once: its argv, whether it runs in bwrap, and what
    the sandbox binds read-only. `spawn` starts one process of it; `agent` names the agent in errors."""

    def __init__(self, opts: CommandOptions, agent: str) -> None:
        self.opts = opts
        self.agent = agent
        self.where = f"{agent} command {opts.cmd!r}"
        self.sandbox: str = "none"  # "bwrap" or "none" (RunRecord.sandbox)
        self.binds: list[str] = []
        try:
            argv = child_argv(opts.cmd or "", os.getcwd())
        except ValueError as e:  # unbalanced quotes
            raise ValueError(f"agent {agent}: option cmd={opts.cmd}: {e}") from None
        if not argv:
            raise ValueError(f"agent {agent}: option cmd= is empty")
        self.argv = argv
        why_not = None if opts.sandbox == "none" else sandbox.unavailable()
        if opts.sandbox == "bwrap" and why_not:
            raise ValueError(f"agent {agent}: sandbox=bwrap: {why_not}")
        if opts.sandbox == "none" or why_not:
            why = "sandbox=none" if opts.sandbox == "none" else why_not
            note_once(f"{agent} agent {opts.cmd!r} runs UNSANDBOXED ({why}): it can read whatever this "
                      "user can, the answer key and iba's /proc included; its rows are marked unsandboxed")
            return
        self.sandbox = "bwrap"
        exe = shutil.which(argv[0]) if os.sep not in argv[0] else os.path.abspath(argv[0])
        if exe:
            self.argv = [exe, *argv[1:]]
        extra = [p.strip() for p in opts.ro.split(",") if p.strip()]
        missing = [p for p in extra if not os.path.exists(p)]
        if missing:
            raise ValueError(f"agent {agent}: option ro={opts.ro}: {missing[0]} does not exist")
        self.binds = sandbox.command_paths(self.argv, extra)

    def hide(self, paths: Sequence[str]) -> None:
        """ValueError if the sandbox would show one of `paths` (or any dataset's hidden files)."""
        if self.sandbox == "bwrap":
            try:
                sandbox.check_binds(self.binds, paths)
            except sandbox.SandboxError as e:
                raise ValueError(f"agent {self.agent}: {e}") from None

    async def spawn(self, *, limit: int = 1 << 16) -> tuple[asyncio.subprocess.Process, str]:
        """Start one process (stdin, stdout, stderr piped; `limit`: the stdout reader's line limit)
        in a fresh private directory; returns it and the directory, which the caller removes
        (`cleanup`). AgentUnavailable when it cannot start."""
        # A private, empty cwd: IBA may be running from the dataset directory itself.
        workdir = tempfile.mkdtemp(prefix="iba-agent-")  # mode 0700
        names = self.opts.names()
        fds: tuple[int, ...] = ()
        try:
            if self.sandbox == "bwrap":
                if not os.path.isabs(self.argv[0]):
                    raise AgentUnavailable(f"cannot start {self.where}: {self.argv[0]!r} is not on PATH")
                args = sandbox.bwrap_arguments(self.argv, workdir=workdir, binds=self.binds, network=self.opts.network)
                fds = (sandbox.args_fd(args),)
                argv = [sandbox.bwrap_binary() or "bwrap", "--args", str(fds[0]), *self.argv]
                env = sandbox.sandbox_env(os.environ, names, self.argv[0])
            else:
                argv = self.argv
                env = child_env(os.environ, set(names), cwd=workdir)
            try:
                proc = await asyncio.create_subprocess_exec(
                    *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                    cwd=workdir, env=env, close_fds=True, pass_fds=fds, start_new_session=True, limit=limit,
                )
            except OSError as e:
                raise AgentUnavailable(f"cannot start {self.where}: {e}") from None
            finally:
                for fd in fds:
                    os.close(fd)
        except BaseException:
            self.cleanup(workdir)
            raise
        return proc, workdir

    @staticmethod
    def cleanup(workdir: str) -> None:
        shutil.rmtree(workdir, ignore_errors=True)

    def exit_error(self, returncode: int, stderr_tail: str, *, during: str = "") -> AgentError:
        """What a command's non-zero exit status means: the sandbox could not start it (an
        infrastructure fault), else the agent's own failure."""
        if self.sandbox == "bwrap" and returncode == 1 and stderr_tail.startswith("bwrap:"):
            return AgentUnavailable(f"{self.where}: the sandbox could not start it: {stderr_tail.strip()}")
        return AgentError(f"{self.where} exited with {returncode}{during}; stderr: {stderr_tail}")


async def post(url: str, payload: bytes, opts: CommandOptions, where: str, *, timeout: float | None = None) -> bytes:
    """POST `payload` (JSON) to `url`; the body of a 200 answer, up to max_reply_mb. A timeout
    (`timeout`, else the option's), an unreachable URL or a 5xx is AgentUnavailable; another status
    or a body over the cap AgentError."""
    import httpx

    timeout = opts.timeout if timeout is None else timeout
    try:
        async with httpx.AsyncClient(timeout=timeout) as client:
            async with client.stream("POST", url, content=payload, headers={"Content-Type": "application/json"}) as resp:
                body = bytearray()
                async for chunk in resp.aiter_bytes():
                    body.extend(chunk)
                    if len(body) > opts.cap:
                        raise too_large(where, opts)
    except httpx.TimeoutException:
        raise AgentUnavailable(f"{where} timed out after {timeout:g}s") from None
    except httpx.HTTPError as e:
        raise AgentUnavailable(f"{where} unreachable: {e}") from None
    text = body.decode(errors="replace")
    if resp.status_code >= 500:  # the agent's server failed: a fault, retried later
        raise AgentUnavailable(f"{where} answered HTTP {resp.status_code}: {text[-TAIL:]}")
    if resp.status_code != 200:
        raise AgentError(f"{where} answered HTTP {resp.status_code}: {text[-TAIL:]}")
    return bytes(body)


class CommandAgent(Agent):
    """An agent that is a command iba starts (cmd=, in the sandbox) or a server (url=): external, memory."""

    def __init__(self, env: AgentEnv, /, **options: str) -> None:
        super().__init__(env, **options)
        # "bwrap" or "none" for a command iba starts (RunRecord.sandbox); None for a url= agent
        self.sandbox: str | None = None
        self.command: Command | None = None
        if self.opts.cmd is not None:
            self.command = Command(self.opts, self.name)
            self.sandbox = self.command.sandbox
        self.hide(())  # a folder holding a dataset's hidden files is refused even when no path is named

    def hide(self, paths: Sequence[str]) -> None:
        if self.command is not None:
            self.command.hide(paths)
