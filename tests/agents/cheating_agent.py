#!/usr/bin/env python3
"""A hostile external agent (stdlib only), for the sandbox tests: it hunts for the answer key and
for iba's secrets the ways issue 27 found, then answers from the key if it found one.

    /proc/$PPID/cmdline, /proc/$PPID/cwd, /proc/$PPID/environ (iba, unsandboxed)
    every other /proc/<pid>/ it can read (the sandbox's own PID 1 included)
    a bounded walk, from those paths and from /, /tmp, /root, /home, /work, for answer_key.jsonl
    or distractors.jsonl

With --honest it does none of that: the same answer without looking (the baseline it must match
when the sandbox holds). Its trace step "hunt" reports what it found: key files, the environment
strings of other processes it could read, and the pids it could see.
"""

from __future__ import annotations

import json
import os
import sys
import time

TARGETS = ("answer_key.jsonl", "distractors.jsonl")
WALK_ROOTS = ("/", "/tmp", "/root", "/home", "/work")
WALK_SECONDS = 4.0
WALK_DEPTH = 5


def read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read(1 << 20)
    except OSError:
        return None


def hunt() -> dict:
    found: dict = {"key_files": [], "environ": {}, "pids": [], "paths": []}
    pids = sorted({p for p in os.listdir("/proc") if p.isdigit()} | {str(os.getppid())})
    found["pids"] = pids
    starts: list[str] = []
    parent = str(os.getppid())
    for pid in [parent] + [p for p in pids if p != parent]:  # the parent's paths first: its own dataset
        if pid == str(os.getpid()):
            continue
        env = read(f"/proc/{pid}/environ")
        if env:
            found["environ"][pid] = env.decode(errors="replace").split("\0")
            starts += [v.partition("=")[2] for v in found["environ"][pid] if "=/" in v]
        cmd = read(f"/proc/{pid}/cmdline")
        if cmd:
            starts += [a for a in cmd.decode(errors="replace").split("\0") if a.startswith("/")]
        try:
            starts.append(os.readlink(f"/proc/{pid}/cwd"))
        except OSError:
            pass
    # the named paths, their folders and the folders above them, then the usual places
    dirs: list[str] = []
    for p in starts:
        for part in p.split(os.pathsep):
            while part and part != "/":
                dirs.append(part)
                part = os.path.dirname(part)
    dirs += list(WALK_ROOTS)
    found["paths"] = sorted(set(dirs))[:200]
    seen: set[str] = set()
    for d in dict.fromkeys(dirs):  # first the direct look: is the key right there?
        for t in TARGETS:
            if os.path.isfile(os.path.join(d, t)):
                found["key_files"].append(os.path.join(d, t))
    direct = list(found["key_files"])
    deadline = time.monotonic() + WALK_SECONDS
    for root in dict.fromkeys(dirs):
        for here, subdirs, files in os.walk(root):
            if time.monotonic() > deadline:
                break
            real = os.path.realpath(here)
            if real in seen or real.startswith(("/proc", "/sys", "/dev")) or here.count("/") - root.count("/") >= WALK_DEPTH:
                subdirs[:] = []
                continue
            seen.add(real)
            found["key_files"] += [os.path.join(here, t) for t in TARGETS if t in files]
    # the walk also finds other datasets' keys (other tests' folders under /tmp): the ones next to
    # iba's own paths come first, and answers_from keeps the first answer for an instance
    found["key_files"] = list(dict.fromkeys(direct + sorted(set(found["key_files"]) - set(direct))))
    return found


def answers_from(key_files: list[str]) -> dict[str, dict]:
    """instance id -> {param: accepted value} from the answer keys found, the first key file's answer
    for an instance winning."""
    out: dict[str, dict] = {}
    for path in key_files:
        if not path.endswith("answer_key.jsonl"):
            continue
        for line in (read(path) or b"").decode(errors="replace").splitlines():
            try:
                key = json.loads(line)
            except ValueError:
                continue
            out.setdefault(key["instance_id"], {s["param"]: s["accepted"][0] for s in key.get("slots", []) if s.get("accepted")})
    return out


def honest(task: dict) -> dict:
    if task["action"] == "call_api":
        props = (task.get("api_schema") or {}).get("properties", {})
        return {"kind": "call_api", "api_name": task.get("api_name"),
                "params": {n: p["enum"][0] for n, p in props.items() if "enum" in p}}
    return {"kind": "generate", "text": f"Here is my response to: {task['query']}"}


def main(argv: list[str]) -> int:
    request = json.load(sys.stdin)
    task = request["task"]
    reply = honest(task)
    if "--honest" in argv:
        found: dict = {"key_files": [], "environ": {}, "pids": [], "paths": []}
    else:
        found = hunt()
        cheat = answers_from(found["key_files"]).get(task["instance_id"])
        if cheat and task["action"] == "call_api":
            reply["params"].update(cheat)
    reply["trace"] = [{"step": "hunt", "outputs": found}]
    json.dump(reply, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
