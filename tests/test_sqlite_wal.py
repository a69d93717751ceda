"""enable_wal: processes that create one SQLite file at once all open it, through each of its
callers (the result store, the response cache) and directly."""

import multiprocessing as mp
import sqlite3

import pytest

from iba.llm.cache import ResponseCache
from iba.run.store import Store
from iba.sqlite_wal import enable_wal


def _raw(path: str) -> None:
    enable_wal(sqlite3.connect(path, timeout=30))


OPENERS = {"direct": _raw, "store": Store, "response cache": ResponseCache}


def _open(how: str, path: str, barrier) -> None:
    barrier.wait()
    OPENERS[how](path)
    assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"


@pytest.mark.parametrize("how", sorted(OPENERS))
def test_processes_creating_one_file_at_once_all_open_it_in_wal(tmp_path, how):
    """Before the retry, SQLite answered 25 to 41 of 600 such opens (three processes on each of 200
    files) "database is locked" at once."""
    ctx = mp.get_context("fork")
    failed = 0
    for i in range(30):
        barrier = ctx.Barrier(3)
        procs = [ctx.Process(target=_open, args=(how, str(tmp_path / f"f{i}.sqlite"), barrier)) for _ in range(3)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
        failed += sum(p.exitcode != 0 for p in procs)
    assert failed == 0
