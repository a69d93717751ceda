"""An OpenAI-compatible embeddings server around an in-process Embedder: `iba serve-embeddings`.

It puts the packaged MiniLM (or any registered embedder) behind the protocol every embeddings client
speaks, so `--embedder openai:<name>` can use it from other machines, and N of them make N replicas.
Standard library only (http.server, one thread per connection; HTTP/1.1 keep-alive). The protocol:

  POST /v1/embeddings  {"model", "input": str | [str, ...], "encoding_format": "float" | "base64",
                        "dimensions"?: the model's own only, "user"?: ignored}
                       -> {"object": "list", "data": [{"object": "embedding", "index", "embedding"}],
                           "model", "usage": {"prompt_tokens", "total_tokens"}}
  GET  /v1/models, /v1/models/<name>, /health

Errors are OpenAI's shape, {"error": {"message", "type", "param", "code"}}: 400 for a malformed
request, 401 for a wrong key (only when a key is set), 404 for another model name or path, 413 for
more inputs than `max_inputs` or a body over `max_body_bytes` (clients split and send again), 500 when
the model fails. base64 is the float32 vector's little-endian bytes, as OpenAI sends it. Token counts
in `usage` are the model's tokens including [CLS]/[SEP], after truncation to its input limit.
"""

from __future__ import annotations

import base64
import hmac
import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

from iba.retrieval.embed import Embedder

log = logging.getLogger(__name__)

DEFAULT_MAX_INPUTS = 2048  # OpenAI's limit per request
DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024


class RequestError(Exception):
    """A request the server refuses: its HTTP status and OpenAI-shaped error fields."""

    def __init__(self, status: int, message: str, *, param: str | None = None, code: str | None = None,
                 kind: str = "invalid_request_error") -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.code, self.kind = status, message, param, code, kind

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}}


class EmbeddingsServer:
    """Serves `embedder` as model `model` on host:port (port 0: a free one; see `url`)."""

    def __init__(self, embedder: Embedder, *, model: str, host: str = "127.0.0.1", port: int = 0,
                 max_inputs: int = DEFAULT_MAX_INPUTS, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
                 api_key: str | None = None) -> None:
        self.embedder = embedder
        self.model = model
        self.max_inputs = max_inputs
        self.max_body_bytes = max_body_bytes
        self._api_key = api_key or None
        self._lock = threading.Lock()
        # counted for benches and tests: requests answered 200, inputs embedded, tokens
        self.requests = 0
        self.inputs = 0
        self.tokens = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive: a client sends many requests on one connection
            server_version = "iba-serve-embeddings"

            def log_message(self, *args: Any) -> None:  # quiet; failures are logged below
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server API
                self._dispatch(server.get)

            def do_POST(self) -> None:  # noqa: N802
                self._dispatch(server.post)

            def _dispatch(self, route: Any) -> None:
                path = self.path.split("?", 1)[0].rstrip("/")
                try:
                    server.authorize(self.headers.get("Authorization"))
                    body = self._body() if self.command == "POST" else None
                    status, reply = 200, route(path, body)
                except RequestError as e:
                    status, reply = e.status, e.body()
                except Exception as e:  # noqa: BLE001 - the model failed: a 500 with its reason, the server lives on
                    log.exception("embedding request failed")
                    status, reply = 500, RequestError(500, f"{type(e).__name__}: {e}", kind="server_error").body()
                data = json.dumps(reply).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True  # the client gave up first

            def _body(self) -> Any:
                length = self.headers.get("Content-Length")
                if length is None:
                    self.close_connection = True
                    raise RequestError(411, "a Content-Length header is required")
                try:
                    n = int(length)
                except ValueError:
                    self.close_connection = True
                    raise RequestError(400, f"bad Content-Length {length!r}") from None
                if n > server.max_body_bytes:
                    self.close_connection = True  # the unread body would be taken for the next request
                    raise RequestError(413, f"request body of {n} bytes is over the limit of {server.max_body_bytes}")
                raw = self.rfile.read(n)
                try:
                    return json.loads(raw)
                except (ValueError, UnicodeDecodeError) as e:
                    raise RequestError(400, f"the request body is not valid JSON ({e})") from None

        self.httpd = ThreadingHTTPServer((host, port), Handler)
        self.httpd.daemon_threads = True
        bound_host, bound_port = self.httpd.server_address[:2]
        self.url = f"http://{bound_host}:{bound_port}/v1"
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ routes
    def authorize(self, header: str | None) -> None:
        if self._api_key is None:
            return
        given = (header or "").removeprefix("Bearer ").strip()
        if not hmac.compare_digest(given.encode(), self._api_key.encode()):
            raise RequestError(401, "Incorrect API key provided (the server's key is in its IBA_SERVE_API_KEY)",
                               code="invalid_api_key")

    def get(self, path: str, _body: Any) -> dict[str, Any]:
        card = {"id": self.model, "object": "model", "created": 0, "owned_by": "iba"}
        if path in ("/v1/models", "/models"):
            return {"object": "list", "data": [card]}
        if path.startswith(("/v1/models/", "/models/")):
            if path.rsplit("/", 1)[1] == self.model:
                return card
            raise RequestError(404, f"The model `{path.rsplit('/', 1)[1]}` does not exist (this server serves "
                               f"`{self.model}`)", param="model", code="model_not_found")
        if path == "/health":
            return {"status": "ok"}
        raise RequestError(404, f"no route GET {path} (GET /v1/models, POST /v1/embeddings)", code="not_found")

    def post(self, path: str, body: Any) -> dict[str, Any]:
        if path not in ("/v1/embeddings", "/embeddings"):
            raise RequestError(404, f"no route POST {path} (POST /v1/embeddings)", code="not_found")
        texts, encoding, dimensions = self.parse(body)
        if dimensions is not None and dimensions != self.embedder.dim:
            raise RequestError(400, "This model does not support specifying dimensions "
                               f"(its vectors have {self.embedder.dim})", param="dimensions")
        vectors = self.embedder.encode(texts)
        tokens = sum(min(len(self.embedder.token_spans(t)) + 2, self.embedder.max_seq_len) for t in texts)
        with self._lock:
            self.requests += 1
            self.inputs += len(texts)
            self.tokens += tokens
        return {
            "object": "list",
            "data": [{"object": "embedding", "index": i, "embedding": _encode(v, encoding)} for i, v in enumerate(vectors)],
            "model": self.model,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }

    def parse(self, body: Any) -> tuple[list[str], str, int | None]:
        """(texts, encoding_format, dimensions) of an embeddings request, or the RequestError it earns."""
        if not isinstance(body, dict):
            raise RequestError(400, "the request body must be a JSON object")
        model = body.get("model")
        if not isinstance(model, str) or not model:
            raise RequestError(400, "you must provide a model parameter", param="model")
        if model != self.model:
            raise RequestError(404, f"The model `{model}` does not exist (this server serves `{self.model}`)",
                               param="model", code="model_not_found")
        raw = body.get("input")
        texts = [raw] if isinstance(raw, str) else raw
        if not isinstance(texts, list) or not texts:
            raise RequestError(400, "'input' must be a string or a non-empty list of strings", param="input")
        if not all(isinstance(t, str) for t in texts):
            raise RequestError(400, "'input' must hold strings: token arrays are not supported by this server",
                               param="input")
        if len(texts) > self.max_inputs:
            raise RequestError(413, f"too many inputs: {len(texts)} > the maximum of {self.max_inputs} per request",
                               param="input", code="too_many_inputs")
        encoding = body.get("encoding_format") or "float"
        if encoding not in ("float", "base64"):
            raise RequestError(400, f"'encoding_format' must be 'float' or 'base64', got {encoding!r}",
                               param="encoding_format")
        dimensions = body.get("dimensions")
        if dimensions is not None and (not isinstance(dimensions, int) or isinstance(dimensions, bool) or dimensions < 1):
            raise RequestError(400, f"'dimensions' must be a positive integer, got {dimensions!r}", param="dimensions")
        return texts, encoding, dimensions

    # ------------------------------------------------------------------ running
    def serve_forever(self) -> None:
        self.httpd.serve_forever(poll_interval=0.2)

    def __enter__(self) -> EmbeddingsServer:
        self._thread = threading.Thread(target=self.serve_forever, name="iba-embeddings-server", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        if self._thread is not None:
            self.httpd.shutdown()
            self._thread.join(timeout=10)
            self._thread = None
        self.httpd.server_close()


def _encode(vector: np.ndarray, encoding: str) -> Any:
    if encoding == "base64":
        return base64.b64encode(np.ascontiguousarray(vector, dtype="<f4").tobytes()).decode("ascii")
    return vector.astype(float).tolist()
