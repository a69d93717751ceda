"""Shards side by side in forked workers: parts summed, results in order, failures reported."""

from __future__ import annotations

import os

import pytest

from iba.construct.workers import InWorker, WorkerError, can_fork, run_shards

pytestmark = pytest.mark.skipif(not can_fork(), reason="workers are forked")


def _double(total: int) -> int:
    return 2 * total


def _shard(i: int, progress, fail: int | None = None, die: int | None = None):
    total = yield (i + 1, _double)  # every shard sees the doubled sum of all parts
    progress(1)
    if i == fail:
        raise ValueError(f"shard {i} broke")
    if i == die:
        os._exit(3)
    again = yield (total, _double)
    progress(2)
    return (i, total, again)


@pytest.mark.parametrize("n", [1, 2, 3])
def test_parts_are_summed_and_every_shard_gets_the_value(n):
    seen = []
    out = run_shards(lambda i, report: _shard(i, report), n, seen.append)
    first = 2 * sum(range(1, n + 1))
    assert out == [(i, first, 2 * n * first) for i in range(n)]
    assert sorted(seen) == [1] * n + [2] * n


def test_a_failing_worker_stops_the_run_with_its_traceback():
    with pytest.raises(WorkerError, match=r"(?s)build worker 2 failed:.*ValueError: shard 1 broke"):
        run_shards(lambda i, report: _shard(i, report, fail=1), 2, lambda k: None)


def test_a_worker_that_dies_is_an_error_not_a_hang():
    with pytest.raises(WorkerError, match="build worker 1 exited without a result"):
        run_shards(lambda i, report: _shard(i, report, die=0), 2, lambda k: None)


def _boom(x: int) -> int:
    raise KeyError(x)


def test_in_worker_returns_the_result_or_raises_the_error():
    w = InWorker(divmod, 17, 5)
    assert w.result() == (3, 2)
    w.close()
    bad = InWorker(_boom, 7)
    with pytest.raises(WorkerError, match="KeyError: 7"):
        bad.result()
    bad.close()


def test_closing_an_unfinished_worker_stops_it():
    import time

    w = InWorker(time.sleep, 60)
    t0 = time.monotonic()
    w.close()
    assert time.monotonic() - t0 < 10 and not w._proc.is_alive()
