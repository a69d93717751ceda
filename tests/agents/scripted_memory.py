#!/usr/bin/env python3
"""A scripted memory system for the protocol tests (docs/memory_systems.md), standard library only.

It keeps what it is sent and, at `act`, shows it: a call_api action takes each enum's first value
(and each integer its minimum),
a generate action's text is a JSON summary, and both carry a trace step `memory-state` whose
outputs say which users' turns it holds, how many sessions it ingested, and its pid. Options:

  --leak PATH      also append every ingested turn id to PATH and read the whole file at act: a
                   memory that shares state across users (sandboxed, PATH in its private /tmp is
                   its own; unsandboxed, every user's process writes the same file)
  --crash-at N     exit with status 3 when asked to ingest session index N (its own failure)
  --hang-at N      stop answering at session index N (a timeout)
  --bad-ack-at N   answer session index N with something that is not an acknowledgement
  --slow S         sleep S seconds per ingested session
  --marker TEXT    ignored: lets a test find this process by its command line
  --serve PORT     an HTTP server instead (POST /reset, /ingest, /act, /close), one memory per user id
"""

from __future__ import annotations

import json
import os
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def options(argv: list[str]) -> dict:
    out = {"leak": None, "crash_at": -1, "hang_at": -1, "bad_ack_at": -1, "slow": 0.0, "serve": None}
    i = 0
    while i < len(argv):
        name, value = argv[i].lstrip("-").replace("-", "_"), argv[i + 1]
        if name != "marker":
            out[name] = value if name in ("leak", "serve") else (float(value) if name == "slow" else int(value))
        i += 2
    return out


class Memory:
    def __init__(self, opts: dict) -> None:
        self.opts = opts
        self.users: list[str] = []  # user ids reset so far (one per process if iba is right)
        self.turn_ids: list[str] = []
        self.sessions = 0

    def handle(self, msg: dict) -> dict:
        kind = msg["type"]
        if kind == "reset":
            self.users.append(msg["user_id"])
            return {"ok": True}
        if kind == "ingest":
            index = msg["index"]
            if index == self.opts["crash_at"]:
                sys.stderr.write(f"crashing at session {index}\n")
                sys.stderr.flush()
                os._exit(3)
            if index == self.opts["hang_at"]:
                time.sleep(3600)
            if index == self.opts["bad_ack_at"]:
                return {"status": "fine"}  # not an acknowledgement
            time.sleep(self.opts["slow"])
            ids = [t["id"] for t in msg["turns"]]
            self.turn_ids += ids
            self.sessions += 1
            if self.opts["leak"]:
                with open(self.opts["leak"], "a") as f:
                    f.write("\n".join(ids) + "\n")
            words = sum(len(t["text"].split()) for t in msg["turns"])
            return {"ok": True, "usage": {"llm_calls": 1, "prompt_tokens": words, "completion_tokens": 5}}
        if kind == "act":
            return self.act(msg["task"])
        if kind == "close":
            return {"ok": True}
        return {"error": f"unknown message type {kind!r}"}

    def act(self, task: dict) -> dict:
        seen = list(self.turn_ids)
        if self.opts["leak"] and os.path.exists(self.opts["leak"]):
            with open(self.opts["leak"]) as f:
                seen = [line.strip() for line in f if line.strip()]
        state = {"users_reset": self.users, "turn_users": sorted({t.split("-")[0] for t in seen}),
                 "turns": len(seen), "sessions": self.sessions, "pid": os.getpid()}
        trace = [{"step": "memory-state", "outputs": state}]
        usage = {"llm_calls": 1, "prompt_tokens": 11, "completion_tokens": 7}
        if task["action"] == "call_api":
            props = (task.get("api_schema") or {}).get("properties", {})
            params = {k: p["enum"][0] if "enum" in p else p.get("minimum", 1) for k, p in props.items()
                      if "enum" in p or p.get("type") == "integer"}
            return {"kind": "call_api", "api_name": task.get("api_name"), "params": params, "trace": trace, "usage": usage}
        return {"kind": "generate", "text": json.dumps(state), "trace": trace, "usage": usage}


def serve(port: int, opts: dict) -> None:
    memories: dict[str, Memory] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            msg = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            kind = self.path.rstrip("/").rsplit("/", 1)[-1]
            if kind != msg.get("type"):
                reply, status = {"error": f"path {self.path} but type {msg.get('type')}"}, 400
            else:
                if kind == "reset":
                    memories[msg["user_id"]] = Memory(opts)
                reply, status = memories[msg["user_id"]].handle(msg), 200
                if kind == "close":
                    memories.pop(msg["user_id"], None)
            body = json.dumps(reply).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


def main(argv: list[str]) -> int:
    opts = options(argv)
    if opts["serve"]:
        serve(int(opts["serve"]), opts)
        return 0
    memory = Memory(opts)
    for line in sys.stdin:
        reply = memory.handle(json.loads(line))
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
