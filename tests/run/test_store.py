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
