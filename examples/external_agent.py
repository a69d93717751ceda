#!/usr/bin/env python3
"""A tiny external agent for IBA (stdlib only). Protocol: docs/external_agents.md.

    iba run DATASET --agent "external?cmd=python examples/external_agent.py"      (one process per task)
    python examples/external_agent.py --serve 8080                                 (HTTP server)
    iba run DATASET --agent "external?url=http://127.0.0.1:8080/act"

It reads {"task": ..., "history": [...]} and answers with an Action. Its "personalisation" is a
deliberately naive heuristic: the most recent user turn that shares words with the request is
echoed as a note (generate), and each enum parameter takes the allowed value the user mentioned
most recently (call_api). Replace `act` with your agent.
"""

from __future__ import annotations

import json
import re
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer


def words(text: str) -> set[str]:
    return set(re.findall(r"[a-z]{4,}", text.lower()))


def act(request: dict) -> dict:
    task, history = request["task"], request["history"]
    user_turns = [t for t in history if t["role"] == "user"]
    if task["action"] == "call_api":
        schema = task.get("api_schema") or {}
        params = {}
        for name, prop in schema.get("properties", {}).items():
            if "enum" in prop:
                mentioned = [v for t in user_turns for v in prop["enum"] if str(v).lower() in t["text"].lower()]
                params[name] = mentioned[-1] if mentioned else prop["enum"][0]
            elif prop.get("type") == "integer":
                params[name] = int(prop.get("minimum", 1))
            elif prop.get("type") == "number":
                params[name] = float(prop.get("minimum", 0))
            elif prop.get("type") == "boolean":
                params[name] = False
            else:
                params[name] = ""
        return {"kind": "call_api", "api_name": task.get("api_name"), "params": params}
    query = words(task["query"])
    related = [t for t in user_turns if words(t["text"]) & query]
    note = f" (Keeping in mind: \"{related[-1]['text'][:200]}\")" if related else ""
    return {"kind": "generate", "text": f"Here is my response to: {task['query']}{note}"}


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - http.server naming
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        try:
            reply, status = json.dumps(act(json.loads(body))).encode(), 200
        except Exception as e:  # a bad request gets a 400 with the reason
            reply, status = json.dumps({"error": str(e)}).encode(), 400
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args) -> None:  # keep stdout/stderr quiet
        pass


def main(argv: list[str]) -> int:
    if argv[:1] == ["--serve"]:
        port = int(argv[1]) if len(argv) > 1 else 8080
        HTTPServer(("127.0.0.1", port), Handler).serve_forever()
        return 0
    request = json.load(sys.stdin)
    json.dump(act(request), sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
