"""The bubblewrap sandbox that `external?cmd=...` agents run in (docs/external_agents.md, "Isolation").

`bwrap` starts the command in new user, PID, IPC, UTS, cgroup and (unless network=true) network
namespaces, with a filesystem built from nothing: a fresh /proc of its own PID namespace (so no
view of iba's processes, their command lines, working directories or environments), a minimal
/dev, the system's /usr (and the merged-/usr links /bin, /lib...), a few /etc files that programs
need to start, read-only binds of the command's own files and its interpreter, one private
writable directory (its cwd and $HOME, at /iba-agent) and a private tmpfs at /tmp. Capabilities
are dropped, the command gets its own session, and it dies with iba (--die-with-parent): when the
sandbox's PID 1 dies the kernel kills every process in its namespace, grandchildren included.

bwrap's own arguments (the bind list) are handed over through a memfd (`--args FD`), so the
sandbox's PID 1 shows the agent only `bwrap --args N <its own command>` in /proc/1/cmdline, and its
environment is the clean one the command gets.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

from iba.dataset import HIDDEN_FILES  # a folder holding one of these is a dataset's (or a held-back key's)

# Where the private writable directory appears inside the sandbox (its cwd and $HOME); /tmp is a
# private tmpfs. Not /tmp itself: the command's own files may live under the host's /tmp.
INSIDE_WORK = "/iba-agent"
INSIDE_TMP = "/tmp"
SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin"
INSTALL_HINT = "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; `make install` tries it)"

# top-level system folders: bound read-only when they are folders, recreated when they are the
# merged-/usr symlinks (/bin -> usr/bin)
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# the few /etc files programs read to start (dynamic linker, alternatives, time zone, users by
# name, TLS roots); never /etc as a whole (shadow files, keys, a host's own configuration)
ETC_FILES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "localtime", "timezone",
             "passwd", "group", "nsswitch.conf", "mime.types", "ssl", "ca-certificates", "ca-certificates.conf",
             "protocols", "services")
ETC_NETWORK_FILES = ("resolv.conf", "hosts", "host.conf", "gai.conf")

_PYTHON = re.compile(r"python[\d.]*$")


class SandboxError(ValueError):
    """The sandbox cannot be set up as asked (a bind that would show hidden files, no bwrap)."""


def bwrap_binary() -> str | None:
    return shutil.which("bwrap")


@functools.cache
def _supports(flag: str) -> bool:
    path = bwrap_binary()
    if path is None:
        return False
    try:
        out = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return False
    return flag in out.stdout + out.stderr


@functools.lru_cache(maxsize=1)
def unavailable() -> str | None:
    """None when bwrap can create the sandbox's namespaces on this machine; else why it cannot
    (not installed; user namespaces disabled, as in many containers). Probed once per process."""
    path = bwrap_binary()
    if path is None:
        return f"bubblewrap (bwrap) is not installed; {INSTALL_HINT}"
    argv = [path, *namespace_args(network=False), *system_binds(network=False), "--", "true"]
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=30, env={"PATH": SANDBOX_PATH})
    except (OSError, subprocess.SubprocessError) as e:
        return f"bwrap cannot run here: {e}"
    if out.returncode != 0:
        why = (out.stderr.strip().splitlines() or [f"exit status {out.returncode}"])[-1]
        return f"bwrap cannot create its namespaces here ({why}); user namespaces may be disabled on this host"
    return None


def namespace_args(*, network: bool) -> list[str]:
    args = ["--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
            "--hostname", "iba-agent", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
            "--proc", "/proc", "--dev", "/dev"]
    if not network:
        args.append("--unshare-net")
    if _supports("--disable-userns"):  # bwrap >= 0.8: no nested user namespaces (less kernel surface)
        args.append("--disable-userns")
    return args


def system_binds(*, network: bool) -> list[str]:
    args: list[str] = []
    for d in SYSTEM_DIRS:
        if os.path.islink(d):
            args += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            args += ["--ro-bind", d, d]
    for name in ETC_FILES + (ETC_NETWORK_FILES if network else ()):
        args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    return args


def _symlink_chain(path: str) -> list[str]:
    """`path` and every path its symlinks pass through, ending at the real file."""
    out, seen = [path], {path}
    p = path
    for _ in range(40):
        if not os.path.islink(p):
            break
        p = os.path.normpath(os.path.join(os.path.dirname(p), os.readlink(p)))
        if p in seen:
            break
        seen.add(p)
        out.append(p)
    real = os.path.realpath(path)
    if real not in seen:
        out.append(real)
    return out


def _python_prefixes(exe: str) -> list[str]:
    """The folders a Python interpreter at `exe` reads at start: its venv (pyvenv.cfg beside bin/)
    and the installation the venv points at, or the installation's own prefix."""
    out: list[str] = []
    prefix = os.path.dirname(os.path.dirname(exe))
    cfg = os.path.join(prefix, "pyvenv.cfg")
    if os.path.isfile(cfg):
        out.append(prefix)
        with contextlib.suppress(OSError):
            for line in Path(cfg).read_text(encoding="utf-8", errors="replace").splitlines():
                key, _, value = line.partition("=")
                if key.strip() == "home" and value.strip():
                    out.append(os.path.dirname(value.strip()))  # home = <base prefix>/bin
    elif any(Path(prefix, "lib").glob("python3*")):
        out.append(prefix)
    return out


def _shebang(path: str) -> str | None:
    """The absolute interpreter of a `#!` script (None for `#!/usr/bin/env NAME`: found on the
    sandbox's PATH, under /usr), else None."""
    try:
        with open(path, "rb") as f:
            head = f.read(256)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    words = head[2:].split(b"\n", 1)[0].decode(errors="replace").split()
    if not words or not words[0].startswith("/") or os.path.basename(words[0]) == "env":
        return None
    return words[0]


def command_paths(argv: list[str], extra: Iterable[str] = ()) -> list[str]:
    """What the command needs to see, read-only: its executable (and every symlink on the way to
    it), a Python interpreter's prefixes, a script's `#!` interpreter, every existing path named in
    its arguments, and the `extra` paths (ro=...). Paths under /usr are already there."""
    paths: list[str] = []
    exes = [argv[0]]
    interp = _shebang(argv[0])
    if interp:
        exes.append(interp)
    for exe in exes:
        for p in _symlink_chain(exe):
            paths.append(p)
            if _PYTHON.match(os.path.basename(p)):
                paths += _python_prefixes(p)
    if argv[0] == sys.executable:  # iba's own interpreter ("python" in cmd=): its prefixes for sure
        paths += [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]
    for a in argv[1:]:
        value = a.partition("=")[2] if a.startswith("-") and "=" in a else a  # --model=/abs/path
        if os.path.isabs(value) and os.path.exists(value):
            paths.append(value)
    paths += [os.path.abspath(p) for p in extra]
    # a path under a folder that is bound anyway is left out: inside that folder it is already
    # there as it is on the host (a symlink stays a symlink), and binding it again over a
    # read-only folder would fail
    unique = sorted({os.path.normpath(p) for p in paths}, key=lambda p: (p.count("/"), p))
    out: list[str] = []
    for p in unique:
        if any(p == d or p.startswith(d.rstrip("/") + "/") for d in ["/usr", *out]):
            continue
        out.append(p)
    return out


def _file_id(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _linked_copy(root: str, ids: dict[tuple[int, int], str]) -> tuple[str, str] | None:
    """(path under `root`, the hidden file it is) for a hard link of a hidden file found there."""
    for folder, dirs, files in os.walk(root):  # symlinks are not followed: inside the sandbox they lead nowhere
        for name in files:
            fid = _file_id(os.path.join(folder, name))
            if fid in ids:
                return os.path.join(folder, name), ids[fid]
    return None


def check_binds(paths: Iterable[str], hidden: Iterable[str | os.PathLike[str]]) -> None:
    """SandboxError if a bind would show one of the `hidden` files (the run's answer key, distractor
    labels, persona states) or a folder above one, or any folder that directly holds a file with one
    of those names (some dataset's), or such a file itself. Files are compared by (device, inode) as
    well as by path: a hard link of the key is the key under another name."""
    hidden_real = [os.path.realpath(h) for h in hidden]
    ids = {fid: h for h in hidden_real if (fid := _file_id(h)) is not None}
    # a hidden file with more than one name may sit anywhere: bound folders are searched for it
    linked = {fid: h for fid, h in ids.items() if os.stat(h).st_nlink > 1}
    for p in paths:
        real = os.path.realpath(p)
        for h in hidden_real:
            if h == real or h.startswith(real.rstrip("/") + "/"):
                raise SandboxError(f"the sandbox would show {p} to the agent, and it holds {h}, which agents "
                                   "must never see; move the agent's files out of that folder")
        if _file_id(real) in ids:
            raise SandboxError(f"the sandbox would show {p} to the agent, and it is {ids[_file_id(real)]} (a hard "
                               "link: the same file under another name), which agents must never see")
        hit = _linked_copy(real, linked) if linked and os.path.isdir(real) else None
        if hit is not None:
            raise SandboxError(f"the sandbox would show {p} to the agent, and it holds {hit[0]}, a hard link of "
                               f"{hit[1]}, which agents must never see; move the agent's files out of that folder")
        if os.path.isdir(real):
            for name in HIDDEN_FILES:
                if os.path.exists(os.path.join(real, name)):
                    raise SandboxError(f"the sandbox would show {p} to the agent, and it holds {name} (a dataset "
                                       "folder); move the agent's files out of that folder")
        elif os.path.basename(real) in HIDDEN_FILES:
            raise SandboxError(f"the sandbox would show {p} to the agent: agents never see {os.path.basename(real)}")


def bwrap_arguments(argv: list[str], *, workdir: str, binds: list[str], network: bool) -> list[str]:
    """bwrap's options (without the command): namespaces, the system folders, a private tmpfs at
    /tmp, `binds` read-only at their own paths, and `workdir` writable at /iba-agent, the cwd.
    Order matters: a bind under /tmp must come after the tmpfs, or the tmpfs would hide it."""
    args = namespace_args(network=network) + system_binds(network=network) + ["--tmpfs", INSIDE_TMP]
    for p in binds:
        args += ["--ro-bind", p, p]
    args += ["--bind", workdir, INSIDE_WORK, "--chdir", INSIDE_WORK]
    return args


def sandbox_env(parent: Mapping[str, str], names: Iterable[str], argv0: str) -> dict[str, str]:
    """The command's whole environment inside the sandbox: a PATH that starts at its executable's
    folder, HOME and PWD at the private directory, TMPDIR at its tmpfs, a UTF-8 locale, and the
    variables named in env=... copied from iba's environment (a name iba lacks stays unset).
    Nothing else."""
    env = {"PATH": f"{os.path.dirname(argv0)}:{SANDBOX_PATH}" if os.path.isabs(argv0) else SANDBOX_PATH,
           "HOME": INSIDE_WORK, "TMPDIR": INSIDE_TMP, "PWD": INSIDE_WORK, "LANG": "C.UTF-8"}
    for name in names:
        if name in parent:
            env[name] = parent[name]
    return env


def args_fd(args: list[str]) -> int:
    """A memfd holding bwrap's NUL-separated options, rewound, for `bwrap --args FD`: the options
    (bind paths) never appear in the sandbox's /proc/1/cmdline."""
    fd = os.memfd_create("iba-bwrap-args", 0)  # not CLOEXEC: the child inherits it through pass_fds
    try:
        data = b"".join(a.encode() + b"\0" for a in args)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd
