from __future__ import annotations

from iba.eval.judge_check import JudgeCheckResult
from iba.report.judges import judge_notes
from iba.run.store import Store


def _result(judge: str, vpr: float, acc: float) -> JudgeCheckResult:
    return JudgeCheckResult(judge=judge, n=24, n_violations=12, n_compliant=12, scored=24, unscored=0,
                            accuracy=acc, violation_pass_rate=vpr, compliant_pass_rate=1.0,
                            prompt_hash="p", case_set_hash=f"c{vpr}")


def test_notes_figures_warnings_and_self_judging(tmp_path):
    path = tmp_path / "s.sqlite"
    with Store(path) as s:
        s.put_judge_check(_result("good", 0.0, 1.0))
        s.put_judge_check(_result("lax", 0.75, 0.62))
    notes = judge_notes(path, ["judge:good", "judge:lax", "judge:never"], agent_models=["lax"])
    good = [n for n in notes if "judge:good" in n]
    assert good == [next(n for n in notes if n.startswith("judge:good"))]  # figures, no warning
    assert "accuracy 1.00" in good[0] and "n=24" in good[0]
    assert any(n.startswith("judge:lax [self-judging") for n in notes)
    assert any(n.startswith("WARNING: judge:lax passes known violations") for n in notes)
    assert any(n.startswith("WARNING: judge:never") and "iba judge-check never --store" in n for n in notes)


def test_notes_without_a_store_warn_for_every_judge(tmp_path):
    notes = judge_notes(tmp_path / "missing.sqlite", ["judge:a"], [])
    assert notes[0] == "judge:a: no judge-check stored" and notes[1].startswith("WARNING")


def test_a_judge_that_says_no_to_everything_is_warned_too(tmp_path):
    # the 1.5B's measured profile: passes 8% of violations but only 17% of compliant responses
    harsh = _result("harsh", 0.08, 0.54).model_copy(update={"compliant_pass_rate": 0.17})
    assert harsh.fails_compliant and not harsh.passes_violations
    path = tmp_path / "s.sqlite"
    with Store(path) as s:
        s.put_judge_check(harsh)
    notes = judge_notes(path, ["judge:harsh"], [])
    assert any(n.startswith("WARNING: judge:harsh fails known-compliant responses (83% of them)") for n in notes)
    assert not any("passes known violations" in n for n in notes)
