"""Any OpenAI-compatible server (`openai:<model>`): vLLM, Ollama, llama.cpp server, OpenAI, DeepSeek...

Uses the official `openai` SDK with its own retries off, so iba.llm.retry applies (backoff +
Retry-After). The API key comes only from OPENAI_API_KEY and appears in no id, log or error.

JSON output, by what the server accepts (the first rejection switches this backend for good):
  1. response_format {"type": "json_object", "schema": ...}  (llama.cpp server: grammar-enforced)
  2. response_format {"type": "json_schema", ...}              (OpenAI, vLLM; llama-cpp-python answers 500)
  3. no response_format; the schema is stated in the prompt     (callers validate, as always)

Faults are retried (bounded, backoff, Retry-After) and end as the ModelCallError subclass that
names them (iba.llm.retry): timeout, rate_limited (429), server_error (5xx), connection (refused,
dropped, a body cut short), bad_response (not JSON, not a chat completion), truncated (the server
stopped the reply before max_tokens: finish_reason "length" with fewer completion tokens than
asked for; a reply that used all of max_tokens is the caller's limit and is returned as is),
rejected (other 4xx, not retried).

Several base URLs (replicas of one model) make an EndpointPool (iba.llm.endpoints): requests go
to the endpoint with the fewest in flight, a connection error, timeout or 5xx marks that endpoint
down for a while and moves the request to another, in-flight requests are bounded per endpoint
and overall. The identity (model_id, cache key) is the model alone: one URL or five, the same
model gives the same cached answers, and no record holds a URL.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from iba.llm.base import Backend, Completion, ModelRequest, ToolCall, ToolSpec
from iba.llm.cache import ResponseCache, open_cache, through_cache
from iba.llm.endpoints import DEFAULT_MAX_IN_FLIGHT_PER_ENDPOINT, FAILOVER_REASONS, Endpoint, EndpointPool, public_url
from iba.llm.models import cache_root
from iba.llm.retry import ModelCallError, RetryPolicy, Verdict, call_with_retries, parse_retry_after
from iba.llm.toolcalls import check_tool_choice, openai_messages, openai_tools, parse_arguments, parse_text_tool_calls
from iba.llm import secrets

if TYPE_CHECKING:  # imported lazily at run time: the SDK is slow to import
    from openai import AsyncOpenAI

log = logging.getLogger(__name__)

JSON_MODES = ("json_object_schema", "json_schema", "prompt")
_LOCAL_HOSTS = {"localhost", "127.0.0.1", "::1", "0.0.0.0"}
PLACEHOLDER_KEY = "sk-no-key"  # local servers ignore the key, but the SDK insists on one


class _FormatRejected(Exception):
    """The server refused our response_format; try the next JSON mode."""


class BadResponse(Exception):
    """The server answered 200 with something that is not the reply asked for (a chat completion;
    an embeddings list, for iba.retrieval.openai_embedder, which shares this module's fault rules)."""


class _Truncated(Exception):
    """The server ended the reply early (finish_reason "length" short of max_tokens)."""


def is_local(base_url: str) -> bool:
    return (urlsplit(base_url).hostname or "") in _LOCAL_HOSTS


# What the two HTTP clients (this backend and iba.retrieval.openai_embedder) share: where they send,
# the key they send, the SDK client per endpoint, and a reply body that is not JSON.

def server_urls(base_url: str | Sequence[str] | None, env: str | None = None) -> list[str]:
    """The URLs given, else those in $`env` (separated by spaces or commas), else $OPENAI_BASE_URL,
    else OpenAI's."""
    urls = [base_url] if isinstance(base_url, str) else list(base_url or [])
    if not urls and env:
        urls = os.environ.get(env, "").replace(",", " ").split()
    return urls or [os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"]


def server_key(key: str | None, urls: Sequence[str], env: Sequence[str], what: str,
               error: type[Exception] = ValueError) -> str:
    """`key`, else the first variable of `env` set, else (every URL local) a placeholder; none for a
    remote URL is an `error` naming the variables to set."""
    key = key or next((os.environ[v] for v in env if os.environ.get(v)), None)
    if key:
        return key
    remote = [u for u in urls if not is_local(u)]
    if remote:
        names = env[0] + (f" (or {', '.join(env[1:])})" if env[1:] else "")
        raise error(f"{what}: set {names} for {public_url(remote[0])} (any value if that server needs no key)")
    return PLACEHOLDER_KEY


def sdk_client(clients: dict[str, Any], url: str, key: str, timeout: float) -> Any:
    """The SDK client of `url` in `clients`, made on first use, its own retries off (iba.llm.retry's apply)."""
    from openai import AsyncOpenAI

    if url not in clients:
        clients[url] = AsyncOpenAI(api_key=key, base_url=url, timeout=timeout, max_retries=0)
    return clients[url]


def not_json(e: json.JSONDecodeError) -> BadResponse:
    """The SDK parses a JSON content-type body without checking it."""
    return BadResponse(f"the reply body is not valid JSON ({e.msg} at char {e.pos})")


class OpenAICompatBackend(Backend):
    def __init__(self, model: str, *, base_url: str | Sequence[str] | None = None, api_key: str | None = None,
                 cache: ResponseCache | None = None, timeout: float = 120.0, max_retries: int = 3,
                 context_window: int = 8192,
                 max_in_flight_per_endpoint: int | None = DEFAULT_MAX_IN_FLIGHT_PER_ENDPOINT,
                 max_in_flight: int | None = None) -> None:
        if not model:
            raise ValueError("openai:<model> needs a model name, e.g. openai:gpt-4o-mini")
        self.model_id = f"openai:{model}"
        self.model = model
        self.context_window = context_window
        self._pool = EndpointPool(server_urls(base_url), max_in_flight_per_endpoint=max_in_flight_per_endpoint,
                                  max_in_flight=max_in_flight, label=self.model_id)
        self.base_urls = tuple(e.url for e in self._pool.endpoints)
        self.base_url = self.base_urls[0]  # the first; kept for callers written for one URL
        key = server_key(api_key, self.base_urls, ("OPENAI_API_KEY",), self.model_id)
        self._key = key  # kept only to scrub it from error text
        # whatever is stored (records, the response cache, reports) is scrubbed of the key and of
        # the URLs' user:password, should a server or a model echo them back in a reply
        secrets.register(None if key == PLACEHOLDER_KEY else key)
        for url in self.base_urls:
            secrets.register_url(url)
        self._timeout = timeout
        self._clients: dict[str, AsyncOpenAI] = {}  # per endpoint URL, for the current loop
        self._client_loop: asyncio.AbstractEventLoop | None = None
        self._cache = cache
        self.retry_policy = RetryPolicy(max_retries=max_retries)
        self._json_mode = JSON_MODES[0]
        # The model alone, not the endpoint: replicas of one model share cached answers, and the
        # key is the same whether one URL or several serve it.
        self._identity = self.model_id

    @property
    def endpoints(self) -> EndpointPool:
        """The endpoint pool (health, in-flight counts, bounds)."""
        return self._pool

    @classmethod
    def from_spec(cls, rest: str, *, base_url: str | Sequence[str] | None = None, cache_dir: str | Path | None = None,
                  use_cache: bool = True, timeout: float = 120.0, max_retries: int = 3, n_ctx: int | None = None,
                  max_in_flight_per_endpoint: int | None = DEFAULT_MAX_IN_FLIGHT_PER_ENDPOINT,
                  max_in_flight: int | None = None, sends: bool = True, **_: Any) -> OpenAICompatBackend:
        # a backend that sends nothing (iba run --batch) needs no key: `iba batch submit` asks for it
        return cls(rest, base_url=base_url, api_key=None if sends else PLACEHOLDER_KEY,
                   cache=open_cache(cache_root(cache_dir)) if use_cache else None, timeout=timeout,
                   max_retries=max_retries, context_window=n_ctx or 8192,
                   max_in_flight_per_endpoint=max_in_flight_per_endpoint, max_in_flight=max_in_flight)

    @property
    def json_mode(self) -> str:
        """How JSON is requested now (see the module doc); changes after a server rejection."""
        return self._json_mode

    async def send(self, request: ModelRequest) -> Completion:
        check_tool_choice(request.tools, request.tool_choice)
        body = chat_request(self.model, request)
        msgs = openai_messages(request.messages)
        json_schema, tools = request.json_schema, request.tools
        use_json = json_schema is not None and not tools

        sent = [0]  # requests sent for this call, over all endpoints and attempts

        async def post(ep: Endpoint, mode: str | None) -> Completion:
            sent[0] += 1
            return await self._send(ep, msgs, body, json_schema, mode, tools)

        async def attempt(mode: str | None) -> Completion:
            # one attempt of the retry loop = one pass over the endpoints that are up (failover is free)
            return await self._pool.run(lambda ep: post(ep, mode), failover=failover_reason)

        async def produce() -> Completion:
            while True:
                mode = self._json_mode if use_json else None
                try:
                    return await call_with_retries(
                        lambda: attempt(mode),
                        model_id=self.model_id,
                        policy=self.retry_policy,
                        classify=classify_fault,
                        secrets=[self._key],
                        passthrough=(_FormatRejected,),
                    )
                except ModelCallError as e:
                    if len(self._pool) == 1:
                        raise
                    final = self._pool_error(e, sent[0])
                except _FormatRejected as why:
                    # Sticky for this backend: one rejection (even a transient 500) is enough to
                    # stop sending that format; prompt + validation always works.
                    nxt = JSON_MODES[JSON_MODES.index(mode) + 1]  # "prompt" never raises this
                    if JSON_MODES.index(nxt) > JSON_MODES.index(self._json_mode):  # concurrent calls
                        log.warning("%s: server rejected JSON mode %s (%s); using %s from now on", self.model_id, mode, why, nxt)
                        self._json_mode = nxt
                    continue
                raise final  # outside the except block: the provider exception is not kept as context

        return await through_cache(self._cache, self._identity, self.model_id, request, produce)

    def _pool_error(self, e: ModelCallError, sent: int) -> ModelCallError:
        """The error of a call over several endpoints: the same class and reason, plus where its
        requests went (public URLs only) and `attempts` = the requests sent."""
        return type(e)(f"{e}{self._pool.where(sent)}", attempts=sent, status=e.status)

    async def _send(
        self,
        ep: Endpoint,
        msgs: list[dict[str, Any]],
        request: dict[str, Any],
        json_schema: dict[str, Any] | None,
        mode: str | None,
        tools: list[ToolSpec] | None,
    ) -> Completion:
        from openai import APIStatusError

        req = dict(request, messages=msgs)
        if mode == "json_object_schema":
            req["response_format"] = {"type": "json_object", "schema": json_schema}
        elif mode == "json_schema":
            req["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "reply", "schema": json_schema, "strict": False},
            }
        elif mode == "prompt":
            req["messages"] = _with_schema_instruction(msgs, json_schema or {})
        try:
            resp = await self._client_for(ep).chat.completions.create(**req)
        except APIStatusError as e:
            # 400/422: the field is unknown; 500/501: llama-cpp-python's answer to json_schema.
            if mode in ("json_object_schema", "json_schema") and e.status_code in (400, 422, 500, 501):
                raise _FormatRejected(f"HTTP {e.status_code}") from None
            raise
        except json.JSONDecodeError as e:
            raise not_json(e) from None
        return parse_chat_completion(resp, tools, request["max_tokens"], self.model_id)

    def _client_for(self, ep: Endpoint) -> Any:
        """The SDK client of endpoint `ep`; new ones per event loop (a connection pool is bound to
        its loop, and a CLI may run several asyncio.run calls in one process)."""
        loop = asyncio.get_running_loop()
        if self._client_loop is not loop:
            self._clients = {}
            self._client_loop = loop
        return sdk_client(self._clients, ep.url, self._key, self._timeout)

    async def aclose(self) -> None:
        if self._clients and self._client_loop is asyncio.get_running_loop():
            for client in self._clients.values():
                await client.close()
        self._clients = {}


def chat_request(model: str, req: ModelRequest) -> dict[str, Any]:
    """The Chat Completions request of one call, less its messages and response_format (shared with
    the Batch API request lines of iba.batch)."""
    request: dict[str, Any] = {"model": model, "max_tokens": req.max_tokens, "temperature": req.temperature}
    if req.seed is not None:
        request["seed"] = req.seed
    if req.stop:
        request["stop"] = req.stop
    if req.tools:
        request["tools"] = openai_tools(req.tools)
        if req.tool_choice in ("auto", "none", "required"):
            request["tool_choice"] = req.tool_choice
        elif req.tool_choice:
            request["tool_choice"] = {"type": "function", "function": {"name": req.tool_choice}}
    return request


def parse_chat_completion(resp: Any, tools: list[ToolSpec] | None, max_tokens: int, model_id: str) -> Completion:
    """A Completion from the SDK's chat completion object (a server's reply, or a line of a Batch API
    output file: iba.batch). Raises BadResponse for what is not a chat completion and _Truncated
    for a reply the server cut short."""
    if isinstance(resp, str):  # the SDK hands back the text of a non-JSON content-type
        raise BadResponse(f"the reply is not JSON: {resp[:200]!r}")
    try:
        choice = resp.choices[0]
        msg = choice.message
        text = msg.content or ""
        finish = choice.finish_reason
    except (AttributeError, IndexError, KeyError, TypeError):
        # the SDK builds the response without validating it: a JSON body of another shape lands here
        raise BadResponse("the reply is JSON but not a chat completion (no choices[0].message)") from None
    calls: list[ToolCall] = []
    unparsed: list[str] = []
    for i, tc in enumerate(msg.tool_calls or []):
        fn = getattr(tc, "function", None)
        if fn is None:
            continue
        try:
            calls.append(ToolCall(id=tc.id or f"call_{i}", name=fn.name, arguments=parse_arguments(fn.arguments)))
        except ValueError:
            # Keep what the model wrote visible instead of dropping a malformed call.
            unparsed.append(f"<tool_call>\n{json.dumps({'name': fn.name, 'arguments': fn.arguments})}\n</tool_call>")
    if unparsed:
        text = "\n".join([text, *unparsed]).strip()
    if tools and not calls and text:
        # Servers without tool parsing return the model's Hermes-format calls as plain text.
        text, calls = parse_text_tool_calls(text, [t.name for t in tools])
    usage = getattr(resp, "usage", None)
    prompt_tokens = getattr(usage, "prompt_tokens", None) or 0
    completion_tokens = getattr(usage, "completion_tokens", None) or 0
    # servers with prefix caching (vLLM, OpenAI) report the prompt tokens they did not recompute
    reused = getattr(getattr(usage, "prompt_tokens_details", None), "cached_tokens", None) or 0
    if finish == "length" and 0 < int(completion_tokens) < max_tokens:
        # Not our max_tokens: the server (its context, a limit, a proxy) cut the reply. Returning
        # it would score a mutilated answer as the agent's own.
        raise _Truncated(
            f"the server stopped the reply after {completion_tokens} of max_tokens={max_tokens} tokens "
            "(finish_reason=length)"
        )
    return Completion(
        text=text,
        tool_calls=calls,
        prompt_tokens=int(prompt_tokens),
        completion_tokens=int(completion_tokens),
        reused_prompt_tokens=int(reused),
        model=model_id,
        finish_reason="tool_calls" if calls else finish,
    )


def schema_note(schema: dict[str, Any]) -> str:
    """The instruction that asks for JSON of `schema` in the prompt (servers and providers that take
    no schema; shared with iba.inspect.backend)."""
    return ("Reply with only a JSON object (no prose, no code fences) that matches this JSON schema:\n"
            + json.dumps(schema, separators=(",", ":"), ensure_ascii=False))


def _with_schema_instruction(msgs: list[dict[str, Any]], schema: dict[str, Any]) -> list[dict[str, Any]]:
    note = schema_note(schema)
    out = list(msgs)
    if out and out[-1].get("role") == "user" and isinstance(out[-1].get("content"), str):
        out[-1] = dict(out[-1], content=out[-1]["content"] + "\n\n" + note)
    else:
        out.append({"role": "user", "content": note})
    return out


def failover_reason(exc: BaseException) -> str | None:
    """The fault, if it is the endpoint's (connection, timeout, 5xx): the request moves elsewhere.
    _FormatRejected is not: it is about the request, and is handled by the caller."""
    if isinstance(exc, _FormatRejected):
        return None
    reason = classify_fault(exc).reason
    return reason if reason in FAILOVER_REASONS else None


def classify_fault(exc: BaseException) -> Verdict:
    import openai

    if isinstance(exc, BadResponse):
        return Verdict(retryable=True, reason="bad_response")  # a gateway's garbage is usually transient
    if isinstance(exc, _Truncated):
        return Verdict(retryable=True, reason="truncated")
    if isinstance(exc, openai.APITimeoutError):  # before its base class, APIConnectionError
        return Verdict(retryable=True, reason="timeout")
    if isinstance(exc, openai.APIConnectionError):
        # The SDK says only "Connection error."; the transport error says what happened
        # (refused, "Server disconnected without sending a response", a body cut short).
        cause = exc.__cause__ or exc.__context__
        detail = f"{type(cause).__name__}: {cause}" if cause is not None else None
        return Verdict(retryable=True, reason="connection", detail=detail)
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        retryable = status in (408, 409, 429) or status >= 500
        if status == 429:
            reason = "rate_limited"
        elif status == 408:
            reason = "timeout"
        else:
            reason = "server_error" if retryable else "rejected"
        headers = getattr(getattr(exc, "response", None), "headers", None)
        return Verdict(retryable=retryable, retry_after=parse_retry_after(headers) if retryable else None,
                       reason=reason, detail=f"HTTP {status}")
    if isinstance(exc, openai.APIResponseValidationError):
        return Verdict(retryable=True, reason="bad_response")
    return Verdict(retryable=False)
