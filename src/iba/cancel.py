"""Cooperative cancellation of blocking work that asyncio cannot stop.

The runner's `asyncio.timeout` cancels an agent's coroutine at its timeout, but a thread it started (embedding
a history, a llama.cpp generation) runs on, holding the CPU and the model's lock, and a process
with such a thread never exits. The runner opens a `scope()` around each action and sets it when
the action times out; blocking loops call `check()` between steps (an embedding batch, a decoded
token) and stop with `Cancelled`. `asyncio.to_thread` copies the context, so a thread sees the
scope of the action that started it; code that hands work to an executor passes `current()` on.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class Cancelled(Exception):
    """The action this work belonged to was cancelled (timed out); nobody waits for the result."""


_current: contextvars.ContextVar[threading.Event | None] = contextvars.ContextVar("iba_cancel", default=None)


@contextmanager
def scope() -> Iterator[threading.Event]:
    """A fresh cancel event for the work started inside the block (set it to stop that work)."""
    event = threading.Event()
    token = _current.set(event)
    try:
        yield event
    finally:
        _current.reset(token)


def current() -> threading.Event | None:
    return _current.get()


def check(event: threading.Event | None = None) -> None:
    """Raise Cancelled if `event` (default: the current scope's) is set."""
    event = event if event is not None else _current.get()
    if event is not None and event.is_set():
        raise Cancelled("cancelled: the action this work belonged to timed out")
