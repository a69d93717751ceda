"""A fault-injecting HTTP proxy for tests, between IBA's openai: backend and a real server.

    with FaultProxy(llama_server) as proxy:          # upstream base URL, e.g. http://127.0.0.1:PORT/v1
        proxy.then(Fault.http(429, retry_after=1))   # one-shot faults, for the next requests in order
        proxy.always(Fault.http(503))                # then this one for every later request (None: forward)
        backend = resolve_backend("openai:m", base_url=proxy.base_url)

Only POST .../chat/completions requests are faulted (`FaultProxy(url, path="/embeddings")`: the
embeddings requests instead); everything else is forwarded. A request
without a fault is forwarded unchanged (body and headers, less hop-by-hop ones) and the upstream
answer returned unchanged. Every request is recorded in `proxy.hits` (arrival time, fault applied),
so a test counts the attempts and measures the waits between them. Standard library only.

Faults: delay (hold the answer past the client's timeout), status (429/500/503..., optional
Retry-After, optionally echoing the Authorization header back as a misbehaving server would),
drop (close without any response), invalid_json (200 with a body that is not JSON), cut_body (the
real answer, cut in half, with the full Content-Length), length (the real answer with its text cut
and finish_reason "length", as a server that stopped early), echo_reply (the real answer, a 200,
with the request's Authorization header appended to its text, as a prompt-injected model or a
debugging gateway might), shrink (an embeddings answer whose vectors keep only their first `dims`
numbers, as a server swapped for another model would send).
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade",
        "content-length", "host"}


@dataclass(frozen=True)
class Fault:
    kind: str  # delay | status | drop | invalid_json | cut_body | length | echo_reply | shrink
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    echo_auth: bool = False
    message: str | None = None  # the error message of a status fault (default "injected HTTP <code>")
    dims: int = 0  # shrink: the numbers each vector keeps

    @staticmethod
    def delay(seconds: float) -> Fault:
        return Fault("delay", delay_s=seconds)

    @staticmethod
    def http(code: int, *, retry_after: float | str | None = None, echo_auth: bool = False,
             message: str | None = None) -> Fault:
        """An error status (429, 500, 503...) with a JSON error body, as servers send them."""
        headers = {"Retry-After": str(retry_after)} if retry_after is not None else {}
        return Fault("status", status=code, headers=headers, echo_auth=echo_auth, message=message)

    @staticmethod
    def shrink(dims: int) -> Fault:
        return Fault("shrink", dims=dims)

    @staticmethod
    def drop() -> Fault:
        return Fault("drop")

    @staticmethod
    def invalid_json() -> Fault:
        return Fault("invalid_json")

    @staticmethod
    def cut_body() -> Fault:
        return Fault("cut_body")

    @staticmethod
    def length() -> Fault:
        return Fault("length")

    @staticmethod
    def echo_reply() -> Fault:
        return Fault("echo_reply")


@dataclass(frozen=True)
class Hit:
    t: float  # time.monotonic() at arrival
    method: str
    path: str
    fault: str | None  # the fault kind applied, None if forwarded
    authorization: str | None


class FaultProxy:
    def __init__(self, upstream: str, path: str = "/chat/completions") -> None:
        up = urlsplit(upstream)
        self._path = path  # the requests faulted (by the end of their path)
        self._up_host, self._up_port = up.hostname or "127.0.0.1", up.port or 80
        self._queue: list[Fault] = []
        self._always: Fault | None = None
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self.hits: list[Hit] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server API
                self._handle()

            def do_GET(self) -> None:  # noqa: N802
                self._handle()

            def _handle(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                fault = outer._take(self.command, self.path, self.headers.get("authorization"))
                try:
                    if fault is None:
                        self._reply(*self._upstream(body))
                    else:
                        getattr(self, f"_fault_{fault.kind}")(fault, body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up first (its timeout): nothing to answer

            def _upstream(self, body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
                conn = http.client.HTTPConnection(outer._up_host, outer._up_port, timeout=300)
                try:
                    headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
                    conn.request(self.command, self.path, body=body or None, headers=headers)
                    resp = conn.getresponse()
                    data = resp.read()
                    return resp.status, [(k, v) for k, v in resp.getheaders() if k.lower() not in _HOP], data
                finally:
                    conn.close()

            def _reply(self, status: int, headers: list[tuple[str, str]], data: bytes, *, length: int | None = None) -> None:
                self.send_response(status)
                for k, v in headers:
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data) if length is None else length))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(data)
                self.wfile.flush()

            def _fault_delay(self, fault: Fault, body: bytes) -> None:
                # Hold the request (a stalled server); answer afterwards if the client still waits.
                if outer._stopping.wait(fault.delay_s):
                    return
                self._reply(*self._upstream(body))

            def _fault_status(self, fault: Fault, body: bytes) -> None:
                message = fault.message or f"injected HTTP {fault.status}"
                if fault.echo_auth:  # as a misbehaving server or gateway might
                    message += f"; you sent Authorization: {self.headers.get('authorization')}"
                data = json.dumps({"error": {"message": message, "type": "injected", "code": fault.status}}).encode()
                self._reply(fault.status, [("Content-Type", "application/json"), *fault.headers.items()], data)

            def _fault_drop(self, fault: Fault, body: bytes) -> None:
                self.close_connection = True  # nothing written: the socket closes without a status line

            def _fault_invalid_json(self, fault: Fault, body: bytes) -> None:
                self._reply(200, [("Content-Type", "application/json")], b'{"id": "chatcmpl-x", "choices": [{"mess')

            def _fault_cut_body(self, fault: Fault, body: bytes) -> None:
                status, headers, data = self._upstream(body)
                self._reply(status, headers, data[: len(data) // 2], length=len(data))
                self.close_connection = True  # closing before Content-Length bytes: a cut body

            def _fault_length(self, fault: Fault, body: bytes) -> None:
                status, headers, data = self._upstream(body)
                reply = json.loads(data)
                choice = reply["choices"][0]
                content = choice["message"].get("content") or ""
                choice["message"]["content"] = content[: len(content) // 2]
                choice["finish_reason"] = "length"
                usage = reply.get("usage") or {}
                if usage.get("completion_tokens"):
                    usage["completion_tokens"] = max(1, usage["completion_tokens"] // 2)
                self._reply(status, headers, json.dumps(reply).encode())

            def _fault_shrink(self, fault: Fault, body: bytes) -> None:
                import base64

                status, headers, data = self._upstream(body)
                reply = json.loads(data)
                for item in reply.get("data", []):
                    emb = item["embedding"]
                    if isinstance(emb, str):  # base64 float32: 4 bytes a number
                        item["embedding"] = base64.b64encode(base64.b64decode(emb)[: 4 * fault.dims]).decode()
                    else:
                        item["embedding"] = emb[: fault.dims]
                self._reply(status, headers, json.dumps(reply).encode())

            def _fault_echo_reply(self, fault: Fault, body: bytes) -> None:
                status, headers, data = self._upstream(body)
                reply = json.loads(data)
                message = reply["choices"][0]["message"]
                message["content"] = (message.get("content") or "") + f" (you sent {self.headers.get('authorization')})"
                self._reply(status, headers, json.dumps(reply).encode())

            def log_message(self, *args: Any) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}{up.path.rstrip('/')}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    # ------------------------------------------------------------------ programming
    def then(self, *faults: Fault) -> FaultProxy:
        """Queue one-shot faults, applied to the next chat-completion requests in order."""
        with self._lock:
            self._queue.extend(faults)
        return self

    def always(self, fault: Fault | None) -> FaultProxy:
        """Apply `fault` to every chat-completion request once the queue is empty (None: forward)."""
        with self._lock:
            self._always = fault
        return self

    def clear(self) -> FaultProxy:
        with self._lock:
            self._queue.clear()
            self._always = None
        return self

    def _take(self, method: str, path: str, auth: str | None) -> Fault | None:
        with self._lock:
            fault = None
            if method == "POST" and path.rstrip("/").endswith(self._path):
                fault = self._queue.pop(0) if self._queue else self._always
            self.hits.append(Hit(time.monotonic(), method, path, fault.kind if fault else None, auth))
            return fault

    # ------------------------------------------------------------------ observing
    def completions(self) -> list[Hit]:
        """The faulted kind of request (chat completions by default) seen so far, retries included."""
        with self._lock:
            return [h for h in self.hits if h.method == "POST" and h.path.rstrip("/").endswith(self._path)]

    def gaps(self) -> list[float]:
        """Seconds between consecutive chat-completion requests: the client's waits (plus request time)."""
        ts = [h.t for h in self.completions()]
        return [b - a for a, b in zip(ts, ts[1:])]

    def reset_hits(self) -> None:
        with self._lock:
            self.hits.clear()

    def __enter__(self) -> FaultProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
