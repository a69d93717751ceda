"""The reference table: each system between the reference rows of its model, null -> system -> oracle.

For every system row (an agent that is not a reference) with a `null` or `oracle` row of the same
model and run beside it: the three scores (and the full-context row's, `direct`, where present),
the system's gain over no history and its gap to the oracle, each a paired difference over the
compared instances with its 95% bootstrap interval, and the share of the null -> oracle gap the
system closes. The gap to the oracle is what better retrieval could still win with this model and
prompt; the oracle row bounds it only for that model.
"""

from __future__ import annotations

from iba.report.data import ReportData
from iba.report.intervals import paired
from iba.report.table_value import Table


def _mean(scores: dict | None) -> float | None:
    return None if not scores else 100 * sum(scores.values()) / len(scores)


def _r(v: float | None) -> float | None:
    return None if v is None else round(v, 1)


def _diff(a: dict | None, b: dict | None) -> tuple[float | None, str | None]:
    """(mean of a - b x100, its 95% interval) over the instances both scored."""
    if not a or not b:
        return None, None
    common = sorted(set(a) & set(b))
    res = paired([a[k] for k in common], [b[k] for k in common])
    if res is None:
        return None, None
    return round(100 * res.diff.mean, 1), f"[{100 * res.diff.lo:.1f}, {100 * res.diff.hi:.1f}]"


def kept_share(data: ReportData) -> float | None:
    """The mean share of each history's turns the full-context rows (direct) showed, from their
    traces (truncate_history: turns given, kept_turns shown); None without such records."""
    shares = []
    for r in data.runs:
        if r.action is None or data.row_keys[r.key].reference != "direct":
            continue
        step = next((s for s in r.action.trace if s.step == "truncate_history"), None)
        if step is not None and step.inputs.get("turns") and isinstance(step.outputs, dict):
            shares.append(step.outputs.get("kept_turns", 0) / step.inputs["turns"])
    return sum(shares) / len(shares) if shares else None


def reference_table(data: ReportData) -> Table | None:
    """None unless some system has a null or oracle row of its model beside it."""
    scores = data.compared_scores
    refs = {(r.model, r.run, r.reference): r for r in data.rows if r.reference}
    rows = []
    for row in data.rows:
        if row.reference:
            continue
        null, full, oracle = (refs.get((row.model, row.run, k)) for k in ("null", "direct", "oracle"))
        if null is None and oracle is None:
            continue
        mine = scores.get(row)
        gain, gain_ci = _diff(mine, scores.get(null) if null else None)
        gap, gap_ci = _diff(scores.get(oracle) if oracle else None, mine)
        lo, hi = (_mean(scores.get(null)) if null else None), (_mean(scores.get(oracle)) if oracle else None)
        closed = None
        if lo is not None and hi is not None and hi - lo > 0 and mine:
            closed = round(100 * (_mean(mine) - lo) / (hi - lo), 1)
        rows.append([row.label, len(mine or {}), _r(lo), _r(_mean(mine)), _r(_mean(scores.get(full))) if full else None,
                     _r(hi), gain, gain_ci, gap, gap_ci, closed])
    if not rows:
        return None
    share = kept_share(data)
    note = ("Scores x100 on the compared instances. null: the direct prompt with no history; full context: "
            "direct, the most recent turns that fit the model's context window")
    note += f" (it showed {100 * share:.1f}% of each history's turns on average)" if share is not None else ""
    note += ("; oracle: only the instance's gold evidence turns, whole (the ceiling when retrieval is perfect). "
             "Differences are paired over the instances both rows scored, with 95% bootstrap intervals (2,000 "
             "resamples, seed 0); gap closed = (system - null) / (oracle - null) x100, shown when the oracle is "
             "above null.")
    cols = ["Agent (model)", "n", "null", "system", "full context", "oracle", "gain over null", "gain 95% CI",
            "gap to oracle", "gap 95% CI", "gap closed %"]
    return Table("references", "Between the references: no history \u2192 system \u2192 gold evidence", cols, rows,
                 note=note, rank_columns=[], cell_format=lambda v: f"{v:g}")
