"""Embeddings from any OpenAI-compatible server: `--embedder openai:<model>`.

OpenAI, text-embeddings-inference, vLLM, Ollama, llama.cpp's server and `iba serve-embeddings` all
answer POST /v1/embeddings. This embedder:

- sends a call's texts as requests of at most `batch` inputs and about `max_batch_tokens` tokens
  (estimated as characters / 3), several in flight. A server that refuses a request as too big (413,
  or a 400/422/500 whose message says too many, too large, too long, maximum, exceeds) gets it again
  split in two, and every later request goes under the halved limit (inputs, or tokens when the
  message speaks of tokens; logged);
- spreads requests over several URLs (replicas) with iba.llm.endpoints (least in flight; failover on
  connection errors, timeouts and 5xx) and retries with iba.llm.retry (backoff, Retry-After on a
  429), with the fault rules of the chat backend (iba.llm.openai_compat). A request that still fails
  is the ModelCallError naming the fault, so a run's record is errored (infrastructure), not failed;
- learns the dimension from the server (one probe request on first use) and names itself
  `openai:<model>@<dim>`. That name keys the index cache, so vectors of another dimension are never
  read back; a reply of another dimension later in the process (a replica serving another model, a
  server swapped mid-run) is an EmbeddingDimensionError that says which endpoint and what to fix;
- chunks with the packaged MiniLM's WordPiece tokenizer (the model's own is on the server): 256-token
  windows are the same chunks as `--embedder minilm`'s;
- asks for base64 vectors (about a third of the bytes of JSON floats), floats from a server that
  refuses base64.

The key: $IBA_EMBED_API_KEY, else $OPENAI_API_KEY (a local URL needs none); it is never stored or
logged. The URLs: `base_url` (--embed-base-url, --embed-endpoints), else $IBA_EMBED_BASE_URL (several
separated by spaces or commas), else $OPENAI_BASE_URL, else https://api.openai.com/v1.

encode() is synchronous, as the Embedder interface is: requests run on one asyncio loop in a daemon
thread per embedder and process, so the in-flight bounds hold over every thread of the process. The
caller waits, and stops when its action's cancel scope is set (iba.cancel).

In code (a memory example, a script):

    from iba.retrieval.openai_embedder import OpenAIEmbedder
    emb = OpenAIEmbedder("nomic-embed-text", base_url="http://127.0.0.1:11434/v1")
    vectors = emb.encode(["I never take the early train"])   # (1, dim) float32, rows of unit length
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import json
import logging
import os
import re
import threading
from collections.abc import Awaitable, Coroutine, Sequence
from typing import Any, TypeVar

import numpy as np

from iba import cancel
from iba.llm.base import LLMError
from iba.llm.endpoints import EndpointPool
from iba.llm.openai_compat import (BadResponse, classify_fault, failover_reason, not_json, sdk_client, server_key,
                                   server_urls)
from iba.llm.retry import ModelBadResponse, ModelCallError, RetryPolicy, call_with_retries
from iba.retrieval.embed import Embedder, normalise

T = TypeVar("T")
log = logging.getLogger(__name__)

DEFAULT_BATCH = 32  # text-embeddings-inference's default --max-client-batch-size; OpenAI allows 2048
DEFAULT_MAX_BATCH_TOKENS = 16_384  # estimated tokens per request (OpenAI allows 300k; TEI batches 16k)
DEFAULT_IN_FLIGHT_PER_ENDPOINT = 4  # requests at once per URL: a server batches what arrives together
DEFAULT_TIMEOUT_S = 120.0
DEFAULT_MAX_RETRIES = 5  # embedding a history is hours of work at scale: ride out a longer outage than a chat call
CHARS_PER_TOKEN = 3  # a conservative estimate (English is ~4 per token in BPE and WordPiece vocabularies)
PROBE_TEXT = "dimension probe"
KEY_VARS = ("IBA_EMBED_API_KEY", "OPENAI_API_KEY")
# what servers say when a request has too many inputs or tokens (OpenAI, TEI, vLLM, llama.cpp's server)
_TOO_BIG = re.compile(r"too (many|large|long|big)|maximum|exceed|batch size|payload", re.I)


class EmbeddingConfigError(LLMError, ValueError):
    """The embedder cannot be set up as given (a bad URL or option, no API key for a remote URL).
    A ValueError for the commands, which check it before any work; an LLMError inside a run, so a
    worker without the key records errored items (rerun them once it has the key), not failed ones."""


class EmbeddingDimensionError(ModelBadResponse):
    """A reply's vectors have another dimension than this process's earlier replies (not retried)."""


class _TooBig(Exception):
    """The server refused the request as too big: too many inputs or tokens (split and sent again)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.message = message


def _positive(option: str, value: Any, model: str) -> int:
    try:
        n = int(value)
    except (TypeError, ValueError):
        n = 0
    if n < 1:
        raise EmbeddingConfigError(f"openai:{model}: {option} must be a positive integer, got {value!r} "
                                   f"(e.g. --embedder 'openai:{model}?{option}=16')")
    return n


def _plus_one(value: Any) -> Any:
    """value + 1 for a count that may be 0 (retries), so _positive can check it; junk passes through."""
    try:
        return int(value) + 1
    except (TypeError, ValueError):
        return value


class OpenAIEmbedder(Embedder):
    """`openai:<model>`: vectors from an OpenAI-compatible /v1/embeddings server (see the module doc)."""

    max_seq_len = 256  # the chunk windows' size; the server truncates to its own model's limit

    def __init__(self, model: str, *, base_url: str | Sequence[str] | None = None, api_key: str | None = None,
                 batch: int | str = DEFAULT_BATCH, max_batch_tokens: int | str = DEFAULT_MAX_BATCH_TOKENS,
                 dimensions: int | str | None = None, timeout: float | str = DEFAULT_TIMEOUT_S,
                 max_retries: int | str = DEFAULT_MAX_RETRIES,
                 max_in_flight_per_endpoint: int | str | None = DEFAULT_IN_FLIGHT_PER_ENDPOINT,
                 max_in_flight: int | str | None = None, retry_policy: RetryPolicy | None = None) -> None:
        super().__init__()
        if not model:
            raise EmbeddingConfigError("openai:<model> needs a model name, e.g. --embedder openai:text-embedding-3-small")
        self.model = model
        self.model_id = f"openai:{model}"
        self.batch = _positive("batch", batch, model)
        self.max_batch_tokens = _positive("max_batch_tokens", max_batch_tokens, model)
        self.dimensions = _positive("dimensions", dimensions, model) if dimensions is not None else None
        try:
            self.timeout = float(timeout)
        except (TypeError, ValueError):
            self.timeout = 0.0
        if not self.timeout > 0:
            raise EmbeddingConfigError(f"openai:{model}: timeout must be a positive number of seconds, got {timeout!r}")
        bound = {k: (_positive(k, v, model) if v is not None else None)
                 for k, v in (("max_in_flight_per_endpoint", max_in_flight_per_endpoint), ("max_in_flight", max_in_flight))}
        try:
            self._pool = EndpointPool(server_urls(base_url, "IBA_EMBED_BASE_URL"), label=self.model_id, **bound)
        except ValueError as e:
            raise EmbeddingConfigError(f"openai:{model} embeddings: {e}") from None
        self._key = server_key(api_key, [e.url for e in self._pool.endpoints], KEY_VARS, f"openai:{model} embeddings",
                               EmbeddingConfigError)  # kept only to send it and to scrub it from error text
        self.retry_policy = retry_policy or RetryPolicy(max_retries=_positive("max_retries", _plus_one(max_retries), model) - 1)
        self._encoding = "base64"
        self._dim: int | None = None  # learnt from the first reply
        self._probe_lock = threading.Lock()
        self._loop_lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: threading.Thread | None = None
        self._loop_pid = 0
        self._clients: dict[str, Any] = {}
        # what went over the wire (benches read these): requests sent, inputs embedded, server-counted tokens
        self.requests = 0
        self.inputs_sent = 0
        self.usage_tokens = 0
        from iba.retrieval.minilm import bare_tokenizer

        self._tokenizer = bare_tokenizer()

    # ------------------------------------------------------------------ identity
    @property
    def endpoints(self) -> EndpointPool:
        return self._pool

    @property
    def dim(self) -> int:  # type: ignore[override]
        """The servers' dimension, from one probe request on first use."""
        if self._dim is None:
            with self._probe_lock:
                if self._dim is None:
                    self._run(self._embed_all([PROBE_TEXT]))
        assert self._dim is not None
        return self._dim

    @property
    def name(self) -> str:  # type: ignore[override]
        """`openai:<model>@<dim>`: the index cache's key (a URL is not: replicas share one cache)."""
        return f"{self.model_id}@{self.dim}"

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        return list(self._tokenizer.encode(text, add_special_tokens=False).offsets)

    # ------------------------------------------------------------------ encoding
    def _encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        # batch_size is the in-process models' knob; requests follow the server's limits instead
        return normalise(self._run(self._embed_all(texts)))

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` on this embedder's loop and wait, stopping when the caller's action is cancelled."""
        loop = self._ensure_loop()
        if threading.current_thread() is self._loop_thread:
            coro.close()
            raise RuntimeError("OpenAIEmbedder.encode called from its own event loop thread")
        scope = cancel.current()
        fut = asyncio.run_coroutine_threadsafe(coro, loop)
        while True:
            try:
                return fut.result(timeout=0.2)
            except concurrent.futures.TimeoutError:
                if scope is not None and scope.is_set():
                    fut.cancel()
                    cancel.check(scope)

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._loop_lock:
            alive = self._loop_thread is not None and self._loop_thread.is_alive()
            if self._loop is None or not alive or self._loop_pid != os.getpid():
                # a new process (fork) or a closed embedder: a fresh loop; clients are bound to their loop
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name="iba-embed-http", daemon=True)
                thread.start()
                self._loop, self._loop_thread, self._loop_pid, self._clients = loop, thread, os.getpid(), {}
            return self._loop

    def close(self) -> None:
        """Close the connections and stop the loop thread (a later encode starts a new one)."""
        with self._loop_lock:
            loop, thread = self._loop, self._loop_thread
            self._loop = self._loop_thread = None
        if loop is None or thread is None or not thread.is_alive() or self._loop_pid != os.getpid():
            return

        async def shut() -> None:
            for client in self._clients.values():
                await client.close()
            self._clients = {}

        try:
            asyncio.run_coroutine_threadsafe(shut(), loop).result(timeout=10)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=10)
            loop.close()

    async def _embed_all(self, texts: list[str]) -> np.ndarray:
        # by length, as the in-process MiniLM batches: a server pads each batch to its longest input. On a
        # full-build history, its user turns in arrival order pad to 2.0x their tokens, sorted to 1.14x
        # (the mixed index: 25% fewer tokens to embed; bench/BENCHMARKS.md, issue 33)
        plan = self._plan(sorted(range(len(texts)), key=lambda i: len(texts[i])), texts)
        parts = await _all([self._batch(texts, idx) for idx in plan])
        if not parts:
            return np.zeros((0, self._dim or 0), dtype=np.float32)
        out = np.empty((len(texts), parts[0].shape[1]), dtype=np.float32)
        for idx, vecs in zip(plan, parts):
            out[idx] = vecs
        return out

    def _plan(self, indices: Sequence[int] | range, texts: list[str]) -> list[list[int]]:
        """Groups of consecutive `indices`, of at most `batch` texts and about `max_batch_tokens` estimated
        tokens (a text over the token budget goes alone: the server says whether it is too long)."""
        groups: list[list[int]] = []
        cur: list[int] = []
        tokens = 0
        for i in indices:
            t = len(texts[i]) // CHARS_PER_TOKEN + 1
            if cur and (len(cur) >= self.batch or tokens + t > self.max_batch_tokens):
                groups.append(cur)
                cur, tokens = [], 0
            cur.append(i)
            tokens += t
        if cur:
            groups.append(cur)
        return groups

    async def _batch(self, texts: list[str], idx: list[int]) -> np.ndarray:
        """The vectors of texts[idx]: one request, or, when the server finds it too big, two halves."""
        try:
            return await self._request([texts[i] for i in idx])
        except _TooBig as e:
            if len(idx) == 1:
                raise ModelCallError(
                    f"{self.model_id}: one input of {len(texts[idx[0]])} characters is too long for the server "
                    f"({e}); use a model with a longer input limit, or smaller chunks (the agents' size= option, "
                    "iba index --size)", status=e.status) from None
            self._shrink(idx, texts, e)
            half = len(idx) // 2
            a, b = await _all([self._batch(texts, idx[:half]), self._batch(texts, idx[half:])])
            return np.concatenate([a, b])

    def _shrink(self, idx: list[int], texts: list[str], e: _TooBig) -> None:
        """Lower the limit the refused request broke, to half its size (sticky: later requests obey it).
        A message about tokens lowers the token budget; any other refusal, the inputs per request (a
        server limited by tokens that does not say so is met that way too, a few halvings later)."""
        tokens = sum(len(texts[i]) // CHARS_PER_TOKEN + 1 for i in idx)
        batch, budget = self.batch, self.max_batch_tokens
        if "token" in e.message.lower():
            budget = min(budget, max(1, tokens // 2))
        else:
            batch = min(batch, max(1, len(idx) // 2))
        if (batch, budget) != (self.batch, self.max_batch_tokens):
            log.warning("%s: the server refused %d inputs (~%d tokens) as too big (%s); sending at most %d inputs "
                        "and ~%d tokens per request from now on", self.model_id, len(idx), tokens, e, batch, budget)
            self.batch, self.max_batch_tokens = batch, budget

    async def _request(self, inputs: list[str]) -> np.ndarray:
        """One request's vectors, retried and failed over; a refusal as too big is raised as _TooBig."""
        sent = [0]

        async def send(ep: Any) -> np.ndarray:
            sent[0] += 1
            return await self._send(ep, inputs)

        try:
            return await call_with_retries(
                lambda: self._pool.run(send, failover=failover_reason),
                model_id=f"{self.model_id} (embeddings)",
                policy=self.retry_policy,
                classify=classify_fault,
                secrets=[self._key],
                passthrough=(_TooBig,),
            )
        except ModelCallError as e:
            final = self._explained(e, sent[0])
        raise final  # outside the except block: the provider exception (and its request) is not kept

    def _explained(self, e: ModelCallError, sent: int) -> ModelCallError:
        """The error with what to fix (a wrong key or model name) and, over several URLs, where it went."""
        msg = str(e)
        if e.status in (401, 403):
            msg += "; check the key in IBA_EMBED_API_KEY (or OPENAI_API_KEY)"
        elif e.status == 404:
            msg += (f"; does the server serve a model named {self.model!r}? (GET /v1/models lists its names; "
                    "the embeddings path is /v1/embeddings under --embed-base-url)")
        if len(self._pool) > 1:
            msg += self._pool.where(sent)
        return type(e)(msg, attempts=sent or e.attempts, status=e.status)

    async def _send(self, ep: Any, inputs: list[str]) -> np.ndarray:
        from openai import APIStatusError

        request: dict[str, Any] = {"model": self.model, "input": inputs, "encoding_format": self._encoding}
        if self.dimensions is not None:
            request["dimensions"] = self.dimensions
        self.requests += 1
        try:
            resp = await self._client_for(ep).embeddings.create(**request)
        except APIStatusError as e:
            message = _error_text(e)
            if request["encoding_format"] == "base64" and e.status_code in (400, 422) and "encoding" in message.lower():
                if self._encoding == "base64":
                    log.warning("%s: the server refused encoding_format=base64 (%s); asking for floats from now on",
                                self.model_id, message[:200])
                    self._encoding = "float"
                return await self._send(ep, inputs)
            if e.status_code == 413 or (e.status_code in (400, 422, 500) and _TOO_BIG.search(message)):
                raise _TooBig(e.status_code, message[:300]) from None
            raise
        except json.JSONDecodeError as e:
            raise not_json(e) from None
        vectors = self._vectors(resp, len(inputs), ep)
        self.inputs_sent += len(inputs)
        return vectors

    def _vectors(self, resp: Any, n: int, ep: Any) -> np.ndarray:
        """(n, dim) float32 from an embeddings reply, checked: one finite vector per input, one dimension."""
        if isinstance(resp, str):  # the SDK hands back the text of a non-JSON content type
            raise BadResponse(f"the reply is not JSON: {resp[:200]!r}")
        data = getattr(resp, "data", None)
        if not isinstance(data, list) or len(data) != n:
            got = len(data) if isinstance(data, list) else "no"
            raise BadResponse(f"the reply holds {got} embeddings for {n} inputs")
        rows: list[np.ndarray | None] = [None] * n
        for pos, item in enumerate(data):
            index = getattr(item, "index", None)
            index = pos if index is None else index
            emb = getattr(item, "embedding", None)
            try:
                if isinstance(emb, str):
                    vec = np.frombuffer(base64.b64decode(emb, validate=True), dtype="<f4").astype(np.float32)
                else:
                    vec = np.asarray(emb, dtype=np.float32)
            except (ValueError, TypeError):
                raise BadResponse(f"embedding {pos} of the reply is neither base64 float32 nor a list of numbers") from None
            if not isinstance(index, int) or not 0 <= index < n or rows[index] is not None or vec.ndim != 1:
                raise BadResponse(f"embedding {pos} of the reply has a bad index ({index!r}) or shape")
            rows[index] = vec
        dims = sorted({len(v) for v in rows if v is not None})
        if len(dims) != 1 or dims[0] == 0:
            raise EmbeddingDimensionError(f"{self.model_id}: {ep.public} returned vectors of dimensions {dims} in one "
                                          "reply; the server is broken or serves several models under one name")
        dim = dims[0]
        if self._dim is None:
            self._dim = dim
        elif dim != self._dim:
            raise EmbeddingDimensionError(
                f"{self.model_id}: {ep.public} returned {dim}-dimensional vectors where this process's earlier "
                f"replies had {self._dim}: the model behind that endpoint changed, or the endpoints serve "
                f"different models. Point every --embed-base-url at the same model; a run restarted on the new "
                f"model indexes under its own cache key ({self.model_id}@{dim}), beside the old index")
        out = np.stack(rows)  # type: ignore[arg-type]
        if not np.isfinite(out).all():
            raise BadResponse("the reply holds non-finite numbers (NaN or infinity)")
        usage = getattr(resp, "usage", None)
        self.usage_tokens += int(getattr(usage, "prompt_tokens", 0) or 0)
        return out

    def _client_for(self, ep: Any) -> Any:
        """The SDK client of an endpoint, on this embedder's loop (created there, used only there)."""
        return sdk_client(self._clients, ep.url, self._key, self.timeout)


def _error_text(e: Any) -> str:
    """The server's own error message (OpenAI's {"error": {"message"}} shape, TEI's {"error": "..."})."""
    body = getattr(e, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict):
            return str(inner.get("message") or inner)
        return str(inner)
    return str(body or getattr(e, "message", "") or e)


async def _all(aws: Sequence[Awaitable[T]]) -> list[T]:
    """asyncio.gather that cancels the others when one fails (their requests are no use then)."""
    tasks = [asyncio.ensure_future(a) for a in aws]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for t in tasks:
            t.cancel()
        raise


__all__ = ["EmbeddingConfigError", "EmbeddingDimensionError", "OpenAIEmbedder"]
