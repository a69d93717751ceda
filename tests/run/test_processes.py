"""`iba run` as real processes on one store: killed with SIGKILL and resumed, and two at once.

The real embedded model (SmolLM2) drives a real agent; what is checked is the store: exactly one
record per planned key, every record scored, the same scores as an uninterrupted run, and work
split between two processes rather than done twice.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from iba.cli import main

pytestmark = pytest.mark.slow

LIMIT = 4


def _iba(*args: str) -> list[str]:
    return [sys.executable, "-m", "iba.cli", *args]


def _common(ds: Path, store: Path, cache: Path) -> list[str]:
    return [str(ds), "--model", "local:smollm2-135m", "--agent", "rag?max_tokens=32", "--store", str(store),
            "--cache-dir", str(cache), "--limit", str(LIMIT), "--quiet"]


def _rows(store: Path, sql: str) -> list[tuple]:
    if not store.exists():
        return []
    db = sqlite3.connect(store, timeout=30)
    try:
        return db.execute(sql).fetchall()
    except sqlite3.OperationalError:  # the schema is not written yet
        return []
    finally:
        db.close()


def _scores(store: Path) -> dict[tuple[str, str], float | None]:
    runs = {k: json.loads(r)["instance_id"] for k, r in _rows(store, "SELECT key, record FROM runs")}
    return {(runs[k], s): json.loads(r)["score"] for k, s, r in _rows(store, "SELECT run_key, scorer, record FROM scores")}


def _done(out: str) -> int:
    m = re.search(r"(\d+) ok, (\d+) failed \(scored 0\), (\d+) errored", out)
    assert m, out
    return sum(int(x) for x in m.groups())


@pytest.fixture(scope="module")
def demo(tmp_path_factory, smollm_gguf) -> Path:
    ds = tmp_path_factory.mktemp("demo") / "ds"
    assert main(["build", "--preset", "demo", "--out", str(ds)]) == 0
    return ds


def test_sigkill_mid_run_then_rerun_finishes_with_one_scored_record_per_key(demo, tmp_path):
    store, cache = tmp_path / "killed.sqlite", tmp_path / "cache"
    cmd = _iba("run", *_common(demo, store, cache))
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 600
    while not _rows(store, "SELECT 1 FROM runs"):  # kill as soon as the first record is stored
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "no record stored in 600 s"
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    stored = len(_rows(store, "SELECT 1 FROM runs"))
    assert 1 <= stored < LIMIT, "the kill came too late to interrupt anything"

    res = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
    assert res.returncode == 0, res.stderr[-3000:]
    assert f"{LIMIT} planned" in res.stdout
    keys = [k for (k,) in _rows(store, "SELECT key FROM runs")]
    assert len(keys) == LIMIT == len(set(keys))  # none lost, none duplicated
    scored = {k for (k,) in _rows(store, "SELECT DISTINCT run_key FROM scores")}
    assert scored == set(keys)  # the record stored before the kill was scored on the rerun too
    assert not _rows(store, "SELECT 1 FROM claims")  # nothing left claimed

    # an uninterrupted run with the same response cache gives the same scores
    fresh = tmp_path / "fresh.sqlite"
    res = subprocess.run(_iba("run", *_common(demo, fresh, cache)), capture_output=True, text=True, timeout=1200)
    assert res.returncode == 0, res.stderr[-3000:]
    assert _scores(fresh) == _scores(store)


def test_two_processes_on_one_store_split_the_work(demo, tmp_path):
    store = tmp_path / "shared.sqlite"
    # separate caches: neither process can finish an item by reading the other's responses
    procs = [subprocess.Popen(_iba("run", *_common(demo, store, tmp_path / f"cache{i}")),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(2)]
    outs = [p.communicate(timeout=1200) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err[-3000:]
    keys = [k for (k,) in _rows(store, "SELECT key FROM runs")]
    assert len(keys) == LIMIT == len(set(keys))
    # each item was run by exactly one process: the two summaries add up to the plan
    assert sum(_done(out) for out, _ in outs) == LIMIT
    scored = {k for (k,) in _rows(store, "SELECT DISTINCT run_key FROM scores")}
    assert scored == set(keys)
