from iba.run.store import Store
from iba.types import RunRecord, ScoreRecord, Verdict


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
