"""Each row's overall score on the same instances, in a few lines: what `iba run` prints last.

The rule is the report's (ReportData.compared: the instances every row scored; an agent's own
failures count 0; a row with no scored instance is named and left out), with the report's 95%
bootstrap interval (instances in id order), and per row how many instances failed (scored 0),
errored and stayed unscored.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from pathlib import Path

from iba.report.data import ReportData, load_report_data
from iba.report.intervals import bootstrap_ci


def overall_lines(data: ReportData) -> list[str]:
    n = len({(i.dataset, i.instance_id) for i in data.compared})
    out = [f"overall, every row on the same {n} instance(s), x100 with a 95% bootstrap interval:"]
    for row in data.rows:
        mine = [i for i in data.instances if i.row == row]
        failed = sum(any(r.status == "failed" for r in i.trials) for i in mine)
        errored = sum(any(r.status == "errored" for r in i.trials) for i in mine)
        unscored = sum(i.score(data.judges) is None and not any(r.status == "errored" for r in i.trials) for i in mine)
        tail = f"{failed} failed (scored 0), {errored} errored, {unscored} unscored of {len(mine)} run"
        if row in data.rows_left_out:
            out.append(f"  {row.label}: no scored instance yet, left out of the comparison ({tail})")
            continue
        ci = bootstrap_ci(list(data.compared_scores[row].values()))  # instances in id order
        if ci is None:
            shown = "-"
        elif ci.n < 2:
            shown = f"{100 * ci.mean:.1f} (n=1: no interval)"
        else:
            shown = f"{ci} (n={ci.n})"
        out.append(f"  {row.label}: {shown}; {tail}")
    return out


def run_overall(store_path: str | Path, run: str, keys: Collection[str], judges: Sequence[str] | None) -> list[str]:
    """overall_lines for the task records of `keys` in run `run` (a command's own selection)."""
    data = load_report_data(store_path, runs=[run], judges=judges)
    mine = ReportData([r for r in data.runs if r.key in keys], [], data.scores, judges=data.judges,
                      domain_order=data.domain_order, domain_short=data.domain_short)
    return overall_lines(mine)
