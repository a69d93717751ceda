import asyncio
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from iba import registry
from iba.run import store as store_module
from iba.run.store import Store, StoreError
from iba.types import RunRecord, ScoreRecord, Verdict
from tests.run.helpers import as_old_store


def _rec(key: str, run: str = "r") -> RunRecord:
    return RunRecord(key=key, run=run, dataset="d", instance_id="i", user_id="u", domain="x", scenario="s",
                     agent="rag", model="m", status="errored", error="boom", started_at="t", iba_version="0")


def test_append_only_and_resume(tmp_path):
    path = tmp_path / "s.sqlite"
    with Store(path) as s:
        assert s.put_run(_rec("k1"))
        assert not s.put_run(_rec("k1", run="other"))  # same key: kept as first written
        assert s.has_run("k1") and not s.has_run("k2")
    with Store(path) as s:  # reopened: the resume point survives
        runs = list(s.runs())
        assert [r.key for r in runs] == ["k1"] and runs[0].run == "r"
        assert s.run_names() == ["r"]


def test_scores_keyed_by_scorer_and_repeat(tmp_path):
    with Store(tmp_path / "s.sqlite") as s:
        v = Verdict(target="c0", kind="checkpoint", judge="m", passed=None, rationale="unparseable")
        assert s.put_score(ScoreRecord(run_key="k1", scorer="judge:a", verdicts=[v], score=None))
        assert s.put_score(ScoreRecord(run_key="k1", scorer="judge:b", verdicts=[v], score=None))
        assert s.put_score(ScoreRecord(run_key="k1", scorer="judge:a", repeat=1, verdicts=[v], score=None))
        assert not s.put_score(ScoreRecord(run_key="k1", scorer="judge:a", verdicts=[], score=1.0))
        assert s.has_score("k1", "judge:b") and not s.has_score("k1", "judge:c")
        assert len(list(s.scores())) == 3
        only_a = list(s.scores("judge:a"))
        assert len(only_a) == 2 and all(r.score is None for r in only_a)


def test_claims_split_work_between_processes(tmp_path):
    path = tmp_path / "s.sqlite"
    a, b = Store(path), Store(path)
    b.owner = "thishost-other:1"  # a second process elsewhere: its claims are trusted until they expire
    assert a.claim("k1", ttl_s=60)
    assert a.claim("k1", ttl_s=60)  # re-claiming one's own key is fine
    assert not b.claim("k1", ttl_s=60)  # held by a live process
    a.put_run(_rec("k1"))
    a.release("k1")
    assert not b.claim("k1", ttl_s=60)  # stored: nothing left to claim
    assert b.claim("k2", ttl_s=-1)  # a claim past its deadline ...
    assert a.claim("k2", ttl_s=60)  # ... is taken over
    a.close()
    b.close()


def test_claim_of_a_dead_process_is_taken_over(tmp_path):
    import socket
    import subprocess
    import sys

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(dead.stdout)  # this process has exited: its claim must not block a resume
    with Store(tmp_path / "s.sqlite") as a, Store(tmp_path / "s.sqlite") as b:
        b.owner = f"{socket.gethostname()}:{pid}"
        assert b.claim("k1", ttl_s=3600)
        assert a.claim("k1", ttl_s=60)
        b.owner = f"{socket.gethostname()}:1"  # pid 1 is alive (PermissionError or not): trusted
        assert b.claim("k3", ttl_s=3600) and not a.claim("k3", ttl_s=60)


def test_a_file_that_is_not_a_store_gives_a_clear_error(tmp_path):
    import pytest

    from iba.run.store import StoreError

    bad = tmp_path / "notes.sqlite"
    bad.write_text("this is not a database\n" * 100)
    with pytest.raises(StoreError, match="notes.sqlite: cannot be used as a result store"):
        Store(bad)
    assert bad.read_text().startswith("this is not a database")  # left as it was


def test_sweep_drops_claims_left_by_a_killed_run(tmp_path):
    with Store(tmp_path / "s.sqlite") as a:
        a.claim("stored", ttl_s=60)
        a.put_run(_rec("stored"))  # killed between storing and releasing
        a.claim("expired", ttl_s=-1)
        a.claim("live", ttl_s=60)
        assert a.sweep_claims() == 2
        assert [k for (k,) in a._db.execute("SELECT key FROM claims")] == ["live"]


def _columns(path: Path) -> list[tuple[str, str]]:
    with closing(sqlite3.connect(path)) as db:
        return db.execute("SELECT key, instance_id FROM runs ORDER BY key").fetchall()


def test_an_old_store_opens_migrated_and_resumes_without_rerunning(tmp_path):
    from iba.dataset import Dataset
    from iba.run.runner import RunConfig, run_dataset
    from tests.fakes import ScriptedBackend
    from tests.run.helpers import tiny_dataset

    registry.register("agents", "spy", "tests.run.test_runner:SpyAgent")
    ds = Dataset(tiny_dataset(tmp_path / "ds"))
    cfg = RunConfig(agents=["spy"], qa=True, trials=2, progress=False)

    def run(store: Store):
        return asyncio.run(run_dataset(ds, ScriptedBackend([]), store, cfg))

    with Store(tmp_path / "new.sqlite") as new:
        assert run(new).ok == 6  # two tasks and a QA probe, two trials
        want_runs, want_scores = list(new.runs()), list(new.scores())
    assert any(r.probe for r in want_runs) and any(s.scorer == "qa" for s in want_scores)
    as_old_store(tmp_path / "new.sqlite", tmp_path / "old.sqlite")
    with Store(tmp_path / "old.sqlite") as old:
        assert list(old.runs()) == want_runs and list(old.scores()) == want_scores  # records read back split
        s = run(old)
        assert (s.planned, s.skipped, s.ok, s.rescored) == (6, 6, 0, 0)  # nothing run or scored again
        assert list(old.runs()) == want_runs and list(old.scores()) == want_scores
    migrated = _columns(tmp_path / "old.sqlite")
    assert migrated == _columns(tmp_path / "new.sqlite")  # the column holds the instance's id
    with closing(sqlite3.connect(tmp_path / "old.sqlite")) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == store_module.VERSION
    with Store(tmp_path / "old.sqlite") as again:  # opened again: nothing left to do
        assert list(again.runs()) == want_runs
    assert _columns(tmp_path / "old.sqlite") == migrated


def test_an_old_store_reports_the_same_figures(tmp_path):
    from iba.report.build import build_report
    from tests.report.fixed_store import build

    ds, path, _ = build(tmp_path / "fixed")
    as_old_store(path, tmp_path / "old.sqlite")
    build_report(path, [ds], tmp_path / "new-report")
    build_report(tmp_path / "old.sqlite", [ds], tmp_path / "old-report")
    files = sorted(p.name for p in (tmp_path / "new-report").iterdir() if p.suffix in (".csv", ".md", ".json"))
    assert any("qa" in f for f in files), files
    for name in files:  # the same but for the store's path, which the report names
        got = (tmp_path / "old-report" / name).read_text().replace(str(tmp_path / "old.sqlite"), str(path))
        assert got == (tmp_path / "new-report" / name).read_text(), name


def test_a_store_of_a_newer_version_is_refused(tmp_path):
    with closing(sqlite3.connect(tmp_path / "s.sqlite")) as db:
        db.execute(f"PRAGMA user_version = {store_module.VERSION + 1}")
    with pytest.raises(StoreError, match="written by a newer iba"):
        Store(tmp_path / "s.sqlite")


def test_a_failed_migration_changes_nothing(tmp_path, monkeypatch):
    """The updates and the version are one transaction: a migration that fails leaves the old store
    as it was (its ids, version 0), and the next open migrates it."""
    from tests.report.fixed_store import build

    _, path, _ = build(tmp_path / "fixed")
    as_old_store(path, tmp_path / "old.sqlite")
    before = _columns(tmp_path / "old.sqlite")
    monkeypatch.setattr(store_module, "_MIGRATIONS", {1: "UPDATE runs SET instance_id = 'x'",
                                                      2: "UPDATE no_such_table SET x = 1"})
    monkeypatch.setattr(store_module, "VERSION", 2)
    with pytest.raises(StoreError, match="no such table"):
        Store(tmp_path / "old.sqlite")
    with closing(sqlite3.connect(tmp_path / "old.sqlite")) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 0
    assert _columns(tmp_path / "old.sqlite") == before
    monkeypatch.undo()
    with Store(tmp_path / "old.sqlite") as s:
        assert any(r.probe for r in s.runs()) and all("::qa::" not in r.instance_id for r in s.runs())
    assert _columns(tmp_path / "old.sqlite") == _columns(path)
