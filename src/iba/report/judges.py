"""Notes on the judges behind a report: their stored judge-check figures and warnings.

`judge_notes` reads the `judge_checks` table written by `iba judge-check --store` and says, for
each judge scorer of a report, how it did on cases with known verdicts, warns when it passes
known violations or fails known-compliant responses (or was never checked), and labels a judge that also ran as an agent model.
"""

from __future__ import annotations

from pathlib import Path

from iba.eval.judge_check import VIOLATION_PASS_WARN, JudgeCheckResult, fmt_rate
from iba.eval.panel import JUDGE_PREFIX
from iba.run.store import Store


def judge_notes(store_path: str | Path, judge_scorers: list[str], agent_models: list[str]) -> list[str]:
    """One or more lines per judge scorer ("judge:<model_id>"), in the order given."""
    checks: dict[str, JudgeCheckResult] = {}
    if Path(store_path).exists():
        with Store(store_path) as store:  # oldest first: the latest check of a judge wins
            checks = {r.judge: r for r in store.judge_checks()}
    agents = set(agent_models)
    lines: list[str] = []
    for scorer in dict.fromkeys(judge_scorers):
        model = scorer[len(JUDGE_PREFIX):] if scorer.startswith(JUDGE_PREFIX) else scorer
        label = " [self-judging: also an agent model]" if model in agents else ""
        r = checks.get(model)
        if r is None:
            lines.append(f"{scorer}{label}: no judge-check stored")
            lines.append(f"WARNING: {scorer} is uncalibrated; run `iba judge-check {model} --store {store_path}`")
            continue
        lines.append(f"{scorer}{label}: judge-check accuracy {fmt_rate(r.accuracy)}, pass rate on known violations "
                     f"{fmt_rate(r.violation_pass_rate)}, on compliant cases {fmt_rate(r.compliant_pass_rate)} "
                     f"(n={r.n}, unscored {r.unscored}, cases {r.case_set_hash}, prompt {r.prompt_hash})")
        if r.violation_pass_rate is None:
            lines.append(f"WARNING: {scorer} scored none of its known violations in the judge-check")
        elif r.violation_pass_rate > VIOLATION_PASS_WARN:
            lines.append(f"WARNING: {scorer} passes known violations ({r.violation_pass_rate:.0%} of them): "
                         "its Generate(text) scores overstate compliance")
        if r.fails_compliant:
            lines.append(f"WARNING: {scorer} fails known-compliant responses ({1 - r.compliant_pass_rate:.0%} of "
                         "them): its Generate(text) scores understate compliance")
    return lines
