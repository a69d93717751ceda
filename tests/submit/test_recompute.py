"""iba.submit.recompute: the aggregates of an entry from its per-instance results."""

from __future__ import annotations

import pytest

from iba.submit import recompute
from iba.submit.schema import InstanceResult, ScorerResult, Usage

U = Usage(llm_calls=1, prompt_tokens=10, completion_tokens=2)


def _trial(iid: str, trial: int, passed: list[bool | None], domain: str = "daily", status: str = "ok",
           failure: str | None = None) -> InstanceResult:
    scored = [p for p in passed if p is not None]
    score = (sum(scored) / len(scored)) if scored else (0.0 if failure else None)
    s = ScorerResult(scorer="slots", score=score, failure=failure,
                     verdicts={f"s{i}": p for i, p in enumerate(passed)})
    r = InstanceResult(instance_id=iid, domain=domain, action="call_api", trial=trial, status=status,  # type: ignore[arg-type]
                       score=None, scores=[s], usage=U, wall_s=1.0)
    return r.model_copy(update={"score": recompute.trial_score(r)})


def test_pass_k_is_the_unbiased_estimator_over_all_trials():
    """tau-bench: per instance C(c, k) / C(n, k) over its n trials. Instance a: 3 trials, 2 perfect;
    b: 2 trials, both perfect. The first-k rule dropped b (fewer trials) and read only a's first k."""
    rs = [_trial("a", 0, [True]), _trial("a", 1, [False]), _trial("a", 2, [True]),
          _trial("b", 0, [True]), _trial("b", 1, [True])]
    got = recompute.pass_k(rs, trials=3)
    assert got == {"1": pytest.approx(100 * (2 / 3 + 1) / 2, abs=0.01),  # 83.33
                   "2": pytest.approx(100 * (1 / 3 + 1) / 2, abs=0.01)}  # 66.67; k=3 needs 3 trials of every instance
    assert recompute.pass_k(rs, trials=1) is None
    # an unscored trial is not a trial: n counts scored ones
    rs.append(_trial("b", 2, [None], status="errored"))
    assert recompute.pass_k(rs, trials=3)["2"] == got["2"]


def test_results_mark_n1_and_count_failures_as_zero():
    rs = [_trial("a", 0, [True, False]), _trial("b", 0, [False, False], status="failed", failure="agent_failed"),
          _trial("c", 0, [True], domain="writing"), _trial("d", 0, [None], status="errored")]
    out = recompute.results(rs, ["daily", "writing"])
    assert out["writing"].n == 1 and out["writing"].ci is None and out["writing"].note.startswith("n=1")
    assert out["daily"].n == 2 and out["daily"].score == 25.0 and out["overall"].n == 3
    assert out["overall"].ci[0] <= out["overall"].score <= out["overall"].ci[1]


def test_a_scorer_score_must_follow_from_its_verdicts():
    ok = ScorerResult(scorer="slots", score=0.5, verdicts={"s0": True, "s1": False})
    assert recompute.scorer_problem(ok) is None
    assert "verdicts give 0.5" in recompute.scorer_problem(ok.model_copy(update={"score": 1.0}))
    no_targets = ScorerResult(scorer="slots", score=0.0, failure="invalid_action", verdicts={})
    assert recompute.scorer_problem(no_targets) is None  # an invalid action on a task without slots scores 0
    assert recompute.scorer_problem(no_targets.model_copy(update={"failure": None})) is not None
    assert recompute.scorer_problem(ScorerResult(scorer="judge:m", score=None, errored=True,
                                                 verdicts={"c0": None})) is None


def test_the_sample_is_what_was_run():
    assert recompute.sample_of(["a", "b"], ["a", "b"]).kind == "full"
    sub = recompute.sample_of(["b"], ["a", "b", "c"])
    assert sub.kind == "subset" and sub.ids == ["b"] and sub.instances == 1
