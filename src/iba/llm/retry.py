"""Retries with exponential backoff and jitter, honouring Retry-After; shared by every backend.

A backend passes a `classify(exc)` that says whether an error is worth another try and how long
the server asked us to wait. After `max_retries` retries (so max_retries + 1 attempts) the last
error becomes an LLMError naming the model; secrets are scrubbed from the message. When the
classifier names the fault (`Verdict.reason`), the error is the ModelCallError subclass for it, so
callers and tests can tell a timeout from a 429 without parsing text; the reason is in the message
too, which is what the run store keeps.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import re
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any, TypeVar

from iba.llm.base import LLMError
from iba.llm.secrets import redact_stored

T = TypeVar("T")
log = logging.getLogger(__name__)

# Provider keys look like sk-..., sk-proj-...; scrub anything key-shaped even if it is not ours
# (servers echo partial keys: "Incorrect API key provided: sk-abc***xyz").
_KEY_SHAPED = re.compile(r"\b(sk|pk|rk)-[A-Za-z0-9_\-\*\.]{6,}")


@dataclass(frozen=True)
class Verdict:
    retryable: bool
    retry_after: float | None = None  # seconds the server asked for, if it did
    reason: str | None = None  # a key of FAULTS; None: a plain LLMError
    detail: str | None = None  # what happened, when the exception's own text does not say


class ModelCallError(LLMError):
    """A model call that failed for a named infrastructure reason (after its retries, if retryable).

    `reason` is one of FAULTS' keys; `attempts` how many requests were sent; `status` the HTTP
    status, if there was one. Still an LLMError: the runner records the item as errored."""

    reason = "error"

    def __init__(self, message: str, *, attempts: int = 1, status: int | None = None) -> None:
        super().__init__(message)
        self.attempts = attempts
        self.status = status


class ModelTimeout(ModelCallError):
    reason = "timeout"


class ModelRateLimited(ModelCallError):
    reason = "rate_limited"


class ModelServerError(ModelCallError):
    reason = "server_error"


class ModelConnectionError(ModelCallError):
    reason = "connection"


class ModelBadResponse(ModelCallError):
    reason = "bad_response"


class ModelTruncated(ModelCallError):
    reason = "truncated"


class ModelRequestRejected(ModelCallError):
    reason = "rejected"


FAULTS: dict[str, type[ModelCallError]] = {
    c.reason: c
    for c in (ModelTimeout, ModelRateLimited, ModelServerError, ModelConnectionError, ModelBadResponse,
              ModelTruncated, ModelRequestRejected)
}


@dataclass
class RetryPolicy:
    max_retries: int = 3
    base_delay: float = 0.5
    max_delay: float = 30.0
    max_retry_after: float = 120.0  # a server asking for longer than this gets this
    jitter: float = 0.25  # +- fraction of the delay
    seed: int | None = 0  # deterministic jitter by default, so runs are reproducible
    sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep  # tests swap in a recorder

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {self.max_retries}")
        self._rng = random.Random(self.seed)

    def backoff(self, retry: int) -> float:
        """Delay before retry number `retry` (1-based): base * 2**(retry-1), capped, jittered."""
        delay = min(self.max_delay, self.base_delay * (2 ** (retry - 1)))
        return max(0.0, delay * (1 + self._rng.uniform(-self.jitter, self.jitter)))

    def delay(self, retry: int, retry_after: float | None) -> float:
        if retry_after is not None:
            # The server knows when it will have capacity; never retry sooner than it asked.
            return min(max(retry_after, 0.0), self.max_retry_after)
        return self.backoff(retry)


def parse_retry_after(headers: Mapping[str, str] | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from `retry-after-ms`, or `Retry-After` as seconds or an HTTP date."""
    if not headers:
        return None
    lower = {k.lower(): v for k, v in headers.items()}
    ms = lower.get("retry-after-ms")
    if ms is not None:
        with contextlib.suppress(ValueError):
            return max(0.0, float(ms) / 1000.0)
    value = lower.get("retry-after")
    if value is None:
        return None
    value = value.strip()
    with contextlib.suppress(ValueError):
        return max(0.0, float(value))
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """An error text without `secrets`, the configured ones (llm.secrets), URL credentials and
    anything key-shaped."""
    text = redact_stored(text, extra=tuple(secrets))
    return _KEY_SHAPED.sub(lambda m: m.group(1) + "-***", text)


def describe(exc: BaseException, secrets: Iterable[str | None] = ()) -> str:
    msg = str(exc).strip() or repr(exc)
    if len(msg) > 500:
        msg = msg[:500] + "..."
    return redact(f"{type(exc).__name__}: {msg}", secrets)


async def call_with_retries(
    fn: Callable[[], Awaitable[T]],
    *,
    model_id: str,
    policy: RetryPolicy,
    classify: Callable[[BaseException], Verdict],
    secrets: Iterable[str | None] = (),
    passthrough: tuple[type[BaseException], ...] = (),
) -> T:
    """Run `fn` until it succeeds, an error is not retryable, or retries run out (-> LLMError)."""
    secrets = list(secrets)
    attempt = 0
    while True:
        attempt += 1
        try:
            return await fn()
        except (asyncio.CancelledError, KeyboardInterrupt):
            raise
        except LLMError:
            raise  # already a model-level failure with its own message; not retried
        except passthrough:
            raise  # the caller handles these itself (e.g. a server rejecting a response_format)
        except Exception as exc:  # noqa: BLE001 - every provider error ends as an LLMError
            verdict = classify(exc)
            if not verdict.retryable or attempt > policy.max_retries:
                final = _final_error(exc, verdict, attempt, model_id, secrets)
            else:
                final = None
                wait = policy.delay(attempt, verdict.retry_after)
                # a run that slows down should say why (redacted: logs are outputs too)
                log.warning("%s: %s (%s); retry %d/%d in %.1fs", model_id, verdict.reason or "error",
                            type(exc).__name__, attempt, policy.max_retries, wait)
        if final is not None:
            # Raised outside the except block: neither __cause__ nor __context__ keeps the provider
            # exception, which may carry the request and its Authorization header.
            raise final
        await policy.sleep(wait)


def _final_error(exc: BaseException, verdict: Verdict, attempts: int, model_id: str, secrets: list[str | None]) -> LLMError:
    what = "failed" if not verdict.retryable else f"failed after {attempts} attempts"
    if verdict.reason is None:
        return LLMError(f"{model_id}: request {what}: {describe(exc, secrets)}")
    why = verdict.reason + (f", {redact(verdict.detail, secrets)}" if verdict.detail else "")
    status = getattr(exc, "status_code", None)
    cls = FAULTS.get(verdict.reason, ModelCallError)
    return cls(f"{model_id}: request {what} ({why}): {describe(exc, secrets)}", attempts=attempts,
               status=status if isinstance(status, int) else None)
