"""Run a build's shards side by side, each in a forked worker (one shard: in this process).

A shard is a generator over its own share of the work. Where it needs something computed over the
whole build (the evidence profile, the anchor rates), it yields `(part, finish)`: its part of the
figure (anything with `+`) and the function (of a module or a class) that turns the sum of all shards' parts
into the value every shard then receives back. Shards run the same code on disjoint work and agree at
those points, so the result does not depend on how many there are (the builder's test compares).

Workers are forked (they inherit the job: nothing but the parts and the results is pickled) and
report progress as they go; a worker's failure stops the build with the worker's traceback. Shards
wait on each other, so they cannot take turns in one process: where fork is not available
(`can_fork`), the caller asks for one shard, which holds all the work.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import traceback
from collections.abc import Callable, Generator
from typing import Any

from iba.cpus import usable_cpus

Shard = Generator[tuple[Any, Callable[[Any], Any]], Any, Any]


def can_fork() -> bool:
    return "fork" in multiprocessing.get_all_start_methods()


def default_workers() -> int:
    """Processes a procedural build (and `iba stats`) uses by default: up to 2. More would gain
    little: planning each persona, the statistics and the files' assembly are not split further."""
    return min(2, usable_cpus()) if can_fork() else 1


class WorkerError(RuntimeError):
    """A worker process failed or died; the message holds its traceback."""


def run_shards(make: Callable[[int, Callable[[int], None]], Shard], n: int, progress: Callable[[int], None]) -> list[Any]:
    """The return values of shards 0..n-1, `make(i, progress)` building shard i. `progress(k)` is
    called in this process for every k units any shard reports. One shard runs here; several run
    in as many forked workers while this process only relays (so that it holds none of their
    data, and what it does next, e.g. the statistics, starts from a small heap)."""
    if n == 1:
        return [_drive(make(0, progress), lambda part, finish: finish(part))]
    ctx = multiprocessing.get_context("fork")
    conns, procs = [], []
    try:
        for i in range(n):
            here, there = ctx.Pipe()
            p = ctx.Process(target=_worker, args=(make, i, there), name=f"iba-build-{i + 1}", daemon=True)
            p.start()
            there.close()
            conns.append(here)
            procs.append(p)
        inbox = _Inbox(conns, procs, progress)
        while True:
            first = inbox.next(0)
            if first[0] == "done":
                break
            parts = [first[1]] + [inbox.expect(i, "part") for i in range(1, n)]
            total = parts[0][0]
            for part, _ in parts[1:]:
                total = total + part
            value = parts[0][1](total)  # the shards' own `finish` (a module or class attribute: pickled by name)
            for c in conns:
                c.send(value)
        results = [first[1]] + [inbox.expect(i, "done") for i in range(1, n)]
        for p in procs:
            p.join()
        return results
    finally:
        for p in procs:
            if p.is_alive():
                p.terminate()
            p.join()
        for c in conns:
            c.close()


class InWorker:
    """`fn(*args)` running in a forked process (only its result is pickled). `result()` waits for
    it (a failure there is a WorkerError here); `close()` ends the worker either way."""

    def __init__(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        ctx = multiprocessing.get_context("fork")
        self._conn, there = ctx.Pipe(duplex=False)
        self._proc = ctx.Process(target=_call, args=(there, fn, args, kwargs), name=f"iba-{getattr(fn, '__name__', 'worker')}",
                                 daemon=True)
        self._proc.start()
        there.close()
        self._answered = False

    def result(self) -> Any:
        try:
            kind, payload = self._conn.recv()
            self._answered = True
        except EOFError:
            self._proc.join(5)
            raise WorkerError(f"worker {self._proc.name} exited without a result (exit code {self._proc.exitcode})") from None
        if kind == "error":
            raise WorkerError(f"worker {self._proc.name} failed:\n{payload}")
        return payload

    def close(self) -> None:
        if not self._answered and self._proc.is_alive():  # given up on: stop it now
            self._proc.terminate()
        self._proc.join()
        self._conn.close()


def _call(conn: Any, fn: Callable[..., Any], args: tuple, kwargs: dict[str, Any]) -> None:
    try:
        conn.send(("done", fn(*args, **kwargs)))
    except BaseException:  # noqa: BLE001 - sent to the parent, which raises it
        conn.send(("error", traceback.format_exc()))
    finally:
        conn.close()


def _drive(shard: Shard, answer: Callable[[Any, Any], Any]) -> Any:
    """Run a shard to its result, each (part, finish) it yields answered by answer(part, finish)."""
    value: Any = None
    while True:
        try:
            part, finish = shard.send(value)
        except StopIteration as stop:
            return stop.value
        value = answer(part, finish)


def _worker(make: Callable[[int, Callable[[int], None]], Shard], index: int, conn: Any) -> None:
    def ask_parent(part: Any, finish: Any) -> Any:
        conn.send(("part", (part, finish)))
        return conn.recv()

    def run() -> Any:
        return _drive(make(index, lambda k: conn.send(("progress", k))), ask_parent)

    _call(conn, run, (), {})  # its result, or its traceback, goes back to the parent


class _Inbox:
    """Messages from the workers: progress is passed on as it is read (from whichever worker sends
    it), the rest kept until asked for."""

    def __init__(self, conns: list[Any], procs: list[Any], progress: Callable[[int], None]) -> None:
        self.conns, self.procs, self.progress = conns, procs, progress
        self.kept: list[list[tuple[str, Any]]] = [[] for _ in conns]
        self.done = [False] * len(conns)  # sent its result: the pipe's end follows

    def _take(self, i: int) -> None:
        try:
            kind, payload = self.conns[i].recv()
        except EOFError:
            self.procs[i].join(5)
            raise WorkerError(f"build worker {i + 1} exited without a result (exit code {self.procs[i].exitcode})") from None
        if kind == "progress":
            self.progress(payload)
        elif kind == "error":
            raise WorkerError(f"build worker {i + 1} failed:\n{payload}")
        else:
            self.kept[i].append((kind, payload))
            self.done[i] = kind == "done"

    def next(self, i: int) -> tuple[str, Any]:
        """The next message of worker i other than progress."""
        while not self.kept[i]:
            live = {self.conns[j]: j for j in range(len(self.conns)) if not self.done[j]}
            for c in multiprocessing.connection.wait(list(live)):
                self._take(live[c])  # type: ignore[index]
        return self.kept[i].pop(0)

    def expect(self, i: int, kind: str) -> Any:
        got, payload = self.next(i)
        if got != kind:
            raise WorkerError(f"build worker {i + 1} sent {got!r} where {kind!r} was expected (shards out of step)")
        return payload
