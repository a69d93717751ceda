"""A latency-bound OpenAI-compatible server for the harness benchmarks (bench/perf.py only).

It answers /v1/chat/completions after a fixed delay with a reply that fits the request's JSON schema
(the first enum value, "x" for strings, 0 for numbers), and counts requests and the most in flight
at once. With `slots` it serves that many requests at a time and queues the rest, as a model
server with a fixed batch does: then throughput is bound by the server, not by the client. It measures the *harness* (concurrency, caching), so the model's latency is the constant we
choose; the model's own speed is measured against the real embedded model elsewhere in the suite.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def fill(schema: dict[str, Any] | None) -> Any:
    """The smallest value of `schema` that validates (required properties only)."""
    if not schema:
        return {}
    if "enum" in schema:
        return schema["enum"][0]
    if "anyOf" in schema or "oneOf" in schema:
        return fill((schema.get("anyOf") or schema.get("oneOf"))[0])
    kind = schema.get("type", "object")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        props = schema.get("properties", {})
        return {k: fill(props.get(k, {})) for k in schema.get("required", [])}
    if kind == "array":
        return [fill(schema.get("items", {}))] * int(schema.get("minItems", 0))
    return {"string": "x", "integer": 0, "number": 0, "boolean": False, "null": None}.get(kind, "x")


class StubServer:
    def __init__(self, latency_s: float = 0.25, slots: int | None = None) -> None:
        """slots: requests served at once (a llama.cpp server with -np 1 has one); more wait."""
        self.latency_s = latency_s
        self._slots = threading.BoundedSemaphore(slots) if slots else None
        self.requests = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_GET(self) -> None:
                self._send({"object": "list", "data": [{"id": "stub", "object": "model"}]})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                with server._lock:
                    server.requests += 1
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    if server._slots is not None:
                        with server._slots:
                            time.sleep(server.latency_s)
                    else:
                        time.sleep(server.latency_s)
                    fmt = body.get("response_format") or {}
                    schema = fmt.get("schema") or (fmt.get("json_schema") or {}).get("schema")
                    content = json.dumps(fill(schema)) if fmt else "A short plan that follows the request."
                    self._send({
                        "id": "stub-1", "object": "chat.completion", "created": 0, "model": body.get("model", "stub"),
                        "choices": [{"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": content}}],
                        "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110},
                    })
                finally:
                    with server._lock:
                        server.in_flight -= 1

            def _send(self, obj: dict[str, Any]) -> None:
                data = json.dumps(obj).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def reset(self) -> None:
        with self._lock:
            self.requests = self.max_in_flight = 0

    def __enter__(self) -> StubServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
