"""Several endpoints (replicas) of one model: least-in-flight choice, failover, bounded concurrency.

One `EndpointPool` per backend. `run(fn, failover=...)` is one *attempt* of a request:

- it sends the request to the endpoint that is up and has the fewest requests in flight (ties:
  round-robin), waiting while every candidate is at `max_in_flight_per_endpoint` or the pool is
  at `max_in_flight`;
- when that endpoint fails with an infrastructure fault (`failover(exc)` names it: connection,
  timeout, 5xx) the endpoint is marked down for a backoff period (doubling per consecutive
  failure, capped; reset by a success) and the request moves at once to another endpoint that is
  up and not yet tried in this attempt. Any other error (a 4xx: the request's own fault) is
  raised as is, never sent elsewhere;
- when no endpoint is up, the attempt goes to one endpoint anyway (fewest in flight, then the one
  whose backoff ends first): a probe, so a recovered server is found and an all-down pool still
  fails through the caller's bounded retries rather than hanging.

The attempt raises the last error once every endpoint that was up has been tried, and the caller's
retry loop (iba.llm.retry) counts it as one attempt: moving off a failing endpoint is free, and a
request sends at most (max_retries + 1) x len(endpoints) requests in all.

asyncio only (one event loop at a time; a new loop starts from a clean in-flight count). The down
state survives loops: a server that was down a moment ago is probably still down.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar
from urllib.parse import urlsplit, urlunsplit

from iba.llm.retry import redact

T = TypeVar("T")
log = logging.getLogger(__name__)

DEFAULT_MAX_IN_FLIGHT_PER_ENDPOINT = 32
DEFAULT_DOWN_S = 1.0  # first backoff of a failing endpoint; doubles per consecutive failure
DEFAULT_MAX_DOWN_S = 60.0
# The fault reasons (iba.llm.retry) that move a request to another endpoint: the server's fault.
# A 429 is not one: it is retried after its Retry-After, as with one endpoint.
FAILOVER_REASONS = frozenset({"connection", "timeout", "server_error"})


def public_url(url: str) -> str:
    """The URL without any user:password part, for ids, logs and messages."""
    parts = urlsplit(url)
    netloc = parts.hostname or ""
    if parts.port:
        netloc += f":{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))


def url_problem(url: str) -> str | None:
    """Why `url` cannot be a server base URL (None if it can)."""
    if not url or any(c.isspace() for c in url):
        return "not a URL (empty or contains spaces)"
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        return "not an http:// or https:// URL"
    try:
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError:
        return "has an invalid port"
    if not parts.hostname:
        return "has no host"
    return None


def check_urls(urls: Sequence[str]) -> list[str]:
    """The URLs, validated: each an http(s) URL, none twice (a duplicate would double its share)."""
    out: list[str] = []
    seen: set[str] = set()
    for url in urls:
        problem = url_problem(url)
        if problem:
            raise ValueError(f"base URL {redact(url)!r} is {problem}")
        key = url.rstrip("/")
        if key in seen:
            raise ValueError(f"base URL {public_url(url)} is given twice")
        seen.add(key)
        out.append(url)
    return out


def read_endpoints_file(path: str | Path) -> list[str]:
    """URLs from an endpoints file: one per line; `#` starts a comment; blank lines are skipped.

    A bad line raises ValueError naming file:line, so a typo stops the run before any request."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ValueError(f"{path}: no such endpoints file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"{path}: cannot read the endpoints file ({type(e).__name__})") from None
    urls: list[str] = []
    seen: dict[str, int] = {}
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        problem = url_problem(line)
        if problem:
            raise ValueError(f"{path}:{lineno}: {redact(line)!r} is {problem}; expected one server URL "
                             "per line, e.g. http://10.0.0.5:8000/v1")
        key = line.rstrip("/")
        if key in seen:
            raise ValueError(f"{path}:{lineno}: {public_url(line)} is already on line {seen[key]}")
        seen[key] = lineno
        urls.append(line)
    if not urls:
        raise ValueError(f"{path}: no endpoint URLs in the file (one per line, # for comments)")
    return urls


@dataclass(eq=False)
class Endpoint:
    url: str  # as given (may hold credentials: never log it; use `public`)
    index: int
    in_flight: int = 0
    sent: int = 0  # requests started here
    ok: int = 0
    failed: int = 0  # failovers from here
    consecutive_failures: int = 0
    down_until: float = 0.0  # clock time; down while clock() < down_until
    last_reason: str | None = None

    @property
    def public(self) -> str:
        return public_url(self.url)


_ROUND_OVER = object()


class EndpointPool:
    """Endpoints of one model; see the module doc. `clock` is injectable for tests."""

    def __init__(
        self,
        urls: Sequence[str],
        *,
        max_in_flight_per_endpoint: int | None = DEFAULT_MAX_IN_FLIGHT_PER_ENDPOINT,
        max_in_flight: int | None = None,
        down_s: float = DEFAULT_DOWN_S,
        max_down_s: float = DEFAULT_MAX_DOWN_S,
        clock: Callable[[], float] = time.monotonic,
        label: str = "",
    ) -> None:
        urls = check_urls(list(urls))
        if not urls:
            raise ValueError("an endpoint pool needs at least one URL")
        for name, bound in (("max_in_flight_per_endpoint", max_in_flight_per_endpoint), ("max_in_flight", max_in_flight)):
            if bound is not None and bound < 1:
                raise ValueError(f"{name} must be >= 1 (or None for no bound), got {bound}")
        self.endpoints = [Endpoint(u, i) for i, u in enumerate(urls)]
        self.max_in_flight_per_endpoint = max_in_flight_per_endpoint
        self.max_in_flight = max_in_flight
        self.down_s = down_s
        self.max_down_s = max_down_s
        self.clock = clock
        self.label = label  # the model id, for log lines
        self.in_flight = 0
        self.peak_in_flight = 0
        self._rr = 0  # next endpoint index to prefer among ties
        self._waiters: list[asyncio.Future[None]] = []
        self._loop: asyncio.AbstractEventLoop | None = None

    def __len__(self) -> int:
        return len(self.endpoints)

    # ------------------------------------------------------------------ health
    def is_down(self, ep: Endpoint | str) -> bool:
        ep = self._endpoint(ep)
        return self.clock() < ep.down_until

    def down_for(self, ep: Endpoint | str) -> float:
        """Seconds until `ep` is tried again normally (0 if up)."""
        return max(0.0, self._endpoint(ep).down_until - self.clock())

    def mark_down(self, ep: Endpoint, reason: str) -> None:
        now = self.clock()
        was_up = now >= ep.down_until
        if was_up:
            # Only a failure while up escalates: N requests in flight on a server that dies
            # would otherwise double its backoff N times at once.
            ep.consecutive_failures += 1
        period = min(self.max_down_s, self.down_s * 2 ** (ep.consecutive_failures - 1))
        # Always pushed out: a failed probe moves this endpoint behind the others, so probes
        # of an all-down pool rotate over the endpoints.
        ep.down_until = max(ep.down_until, now + period)
        ep.failed += 1
        ep.last_reason = reason
        if was_up and len(self.endpoints) > 1:
            log.warning("%s: endpoint %s down for %.1fs (%s); its requests go to the other endpoints",
                        self.label, ep.public, period, reason)

    def mark_up(self, ep: Endpoint) -> None:
        if ep.consecutive_failures and len(self.endpoints) > 1:
            log.info("%s: endpoint %s answers again", self.label, ep.public)
        ep.consecutive_failures = 0
        ep.down_until = 0.0
        ep.last_reason = None

    # ------------------------------------------------------------------ choice
    def choose(self, tried: Sequence[Endpoint] = ()) -> Endpoint | None | object:
        """The endpoint for the next try of an attempt that already tried `tried`.

        None: a candidate exists but all are at their bound (wait for a release); _ROUND_OVER:
        every endpoint that is up was tried (the attempt has failed)."""
        now = self.clock()
        untried = [e for e in self.endpoints if e not in tried]
        up = [e for e in untried if now >= e.down_until]
        if up:
            cands, probe = up, False
        elif not tried and untried:
            cands, probe = untried, True  # nothing is up: probe one (see the module doc)
        else:
            return _ROUND_OVER
        if self.max_in_flight is not None and self.in_flight >= self.max_in_flight:
            return None
        cap = self.max_in_flight_per_endpoint
        free = [e for e in cands if cap is None or e.in_flight < cap]
        if not free:
            return None
        n = len(self.endpoints)

        def rank(e: Endpoint) -> tuple:
            rotation = (e.index - self._rr) % n
            return (e.in_flight, e.down_until, rotation) if probe else (e.in_flight, rotation)

        return min(free, key=rank)

    def _take(self, ep: Endpoint) -> None:
        ep.in_flight += 1
        ep.sent += 1
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        self._rr = (ep.index + 1) % len(self.endpoints)

    def _release(self, ep: Endpoint) -> None:
        ep.in_flight -= 1
        self.in_flight -= 1
        waiters, self._waiters = self._waiters, []
        for fut in waiters:  # each re-checks; the ones still blocked wait again
            if not fut.done():
                fut.set_result(None)

    async def _acquire(self, tried: list[Endpoint]) -> Endpoint | None:
        while True:
            ep = self.choose(tried)
            if ep is _ROUND_OVER:
                return None
            if ep is not None:
                assert isinstance(ep, Endpoint)
                self._take(ep)
                return ep
            fut = asyncio.get_running_loop().create_future()
            self._waiters.append(fut)
            try:
                await fut
            finally:
                if fut in self._waiters:  # cancelled while waiting
                    self._waiters.remove(fut)

    def _enter_loop(self) -> None:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            # a finished asyncio.run leaves nothing in flight; its futures belong to the dead loop
            self._loop = loop
            self._waiters = []
            self.in_flight = 0
            for e in self.endpoints:
                e.in_flight = 0

    # ------------------------------------------------------------------ requests
    async def run(
        self,
        fn: Callable[[Endpoint], Awaitable[T]],
        *,
        failover: Callable[[BaseException], str | None],
    ) -> T:
        """One attempt of a request: `fn(endpoint)`, failed over across endpoints (module doc)."""
        self._enter_loop()
        tried: list[Endpoint] = []
        last: BaseException | None = None
        while True:
            ep = await self._acquire(tried)
            if ep is None:
                assert last is not None  # a round ends only after a try failed over
                # raised outside any except block, so no provider exception rides along as context
                raise last
            tried.append(ep)
            try:
                result = await fn(ep)
            except Exception as exc:  # noqa: BLE001 - sorted below: failed over or raised as is
                reason = failover(exc)
                if reason is None:
                    raise
                self.mark_down(ep, reason)
                last = exc
                continue
            finally:
                self._release(ep)
            ep.ok += 1
            self.mark_up(ep)
            return result

    def summary(self) -> str:
        """The health of each endpoint now, for an error message (public URLs only)."""
        return "; ".join(
            f"{e.public} {'down' if self.is_down(e) else 'up'}"
            + (f" (last fault: {e.last_reason})" if e.last_reason else "")
            for e in self.endpoints
        )

    def where(self, sent: int) -> str:
        """What a failed call's error adds: how many requests went over the endpoints, and their health."""
        return f" [{sent} request{'s' if sent != 1 else ''} over {len(self)} endpoints: {self.summary()}]"

    def _endpoint(self, ep: Endpoint | str) -> Endpoint:
        if isinstance(ep, Endpoint):
            return ep
        key = ep.rstrip("/")
        for e in self.endpoints:
            if e.url.rstrip("/") == key or e.public == key:
                return e
        raise KeyError(f"no endpoint {public_url(ep)} in this pool")


__all__ = [
    "DEFAULT_MAX_IN_FLIGHT_PER_ENDPOINT",
    "Endpoint",
    "EndpointPool",
    "FAILOVER_REASONS",
    "check_urls",
    "public_url",
    "read_endpoints_file",
    "url_problem",
]
