"""Section 5's analyses (Figure 5) and judge agreement, as plain numbers (plots.py draws them).

(a) score by number of evidence items (1, 2, 3, 4, 5+; the answer key's non-superseded evidence);
(b) score by number of constraints (checkpoints + slots), smoothed with a sliding window w=2:
    the point at k pools the instances with k or k+1 constraints (labelled "k-k+1");
(c) static vs dynamic: per-target pass rate, a target being one checkpoint or slot of one run,
    its value the mean over judges (each the mean over repeats) of its scored verdicts;
(d) QA vs task: QA-probe accuracy beside the task score of the instances whose probes were asked.
All scores x100. Each series maps a row label to {x label: (value, n)}.
"""

from __future__ import annotations

from collections import defaultdict
from itertools import combinations

from iba.eval.agreement import agreement_summary
from iba.eval.aggregate import mean
from iba.report.data import Instance, ReportData, RowKey
from iba.report.table_value import Table

Series = dict[str, dict[str, tuple[float | None, int]]]


def _point(insts: list[Instance], judges) -> tuple[float | None, int]:
    vals = [s for s in (i.score(judges) for i in insts) if s is not None]
    return (100.0 * sum(vals) / len(vals) if vals else None), len(vals)


def by_evidence(data: ReportData) -> Series:
    out: Series = {}
    for row in data.rows:
        bins: dict[str, list[Instance]] = defaultdict(list)
        for i in data.instances:
            if i.row == row and i.key is not None:
                n = i.key.n_evidence
                bins["5+" if n >= 5 else str(n)].append(i)
        if bins:
            order = sorted(bins, key=lambda b: int(b.rstrip("+")))
            out[row.label] = {b: _point(bins[b], data.judges) for b in order}
    return out


def by_constraints(data: ReportData, window: int = 2) -> Series:
    out: Series = {}
    for row in data.rows:
        by_n: dict[int, list[Instance]] = defaultdict(list)
        for i in data.instances:
            if i.row == row and i.key is not None:
                by_n[i.key.n_constraints].append(i)
        if not by_n:
            continue
        lo, hi = min(by_n), max(by_n)
        points = {}
        if hi - lo + 1 < window:
            points[str(lo) if lo == hi else f"{lo}-{hi}"] = _point([x for v in by_n.values() for x in v], data.judges)
        for k in range(lo, hi - window + 2):
            pooled = [x for n in range(k, k + window) for x in by_n.get(n, [])]
            if pooled:
                points[f"{k}-{k + window - 1}"] = _point(pooled, data.judges)
        out[row.label] = points
    return out


def target_passes(inst: Instance, run, judges) -> dict[str, float]:
    """target (checkpoint or slot id) -> pass value in [0,1] for one trial: the mean over judges
    (each the mean over its repeats) of the scored verdicts; CallAPI: the slot verdict. Targets
    with no scored verdict are absent. Figure 5(c) and the attribution table share this rule."""
    wanted = None if judges is None else {j if j.startswith("judge:") else f"judge:{j}" for j in judges}
    # target -> judge scorer (or "slots") -> verdict values over repeats
    per: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in inst.scores.get(run.key, []):
        use = r.scorer == "slots" if inst.kind == "call_api" else (
            r.scorer.startswith("judge:") and (wanted is None or r.scorer in wanted))
        if not use:
            continue
        for v in r.verdicts:
            if v.passed is not None:
                per[v.target][r.scorer].append(float(v.passed))
    return {t: mean(mean(v) for v in by_judge.values()) for t, by_judge in per.items()}  # type: ignore[misc]


def _target_values(inst: Instance, judges) -> list[tuple[str, float]]:
    """(kind static|dynamic, pass value in [0,1]) per scored target of each trial."""
    if inst.key is None:
        return []
    kinds = {c.id: c.kind for c in inst.key.checkpoints} | {s.id: s.kind for s in inst.key.slots}
    out = []
    for run in inst.trials:
        for target, value in target_passes(inst, run, judges).items():
            if target in kinds:
                out.append((kinds[target], value))
    return out


def static_dynamic(data: ReportData) -> Series:
    out: Series = {}
    for row in data.rows:
        vals: dict[str, list[float]] = defaultdict(list)
        for i in data.instances:
            if i.row == row:
                for kind, v in _target_values(i, data.judges):
                    vals[kind].append(v)
        if vals:
            out[row.label] = {k: ((100.0 * sum(vals[k]) / len(vals[k])) if vals[k] else None, len(vals[k]))
                              for k in ("static", "dynamic")}
    return out


def qa_vs_task(data: ReportData) -> Series:
    """Per row: QA accuracy and the task score on the same footing for every row: the probes every
    row has a scored answer for, whose instances are among the compared ones."""
    kept = {(i.dataset, i.instance_id) for i in data.compared}
    answered: dict[RowKey, dict[tuple[str, str, str | None], float]] = {}
    for r in data.qa_runs:
        vals = [s.score for s in data.scores.get(r.key, []) if s.scorer == "qa" and s.score is not None]
        if vals and (r.dataset, r.instance_id) in kept:
            answered.setdefault(data.row_keys[r.key], {})[(r.dataset, r.instance_id, r.probe)] = vals[0]
    rows = [row for row in data.rows if row in answered]
    if not rows:
        return {}
    common = set.intersection(*(set(answered[row]) for row in rows))
    inst_by = {(i.row, i.dataset, i.instance_id): i for i in data.instances}
    out: Series = {}
    for row in rows:
        qa_vals = [answered[row][p] for p in sorted(common)]
        bases = sorted({(d, iid) for d, iid, _ in common})
        task = [inst_by[(row, d, iid)] for d, iid in bases if (row, d, iid) in inst_by]
        out[row.label] = {
            "QA": ((100.0 * sum(qa_vals) / len(qa_vals)) if qa_vals else None, len(qa_vals)),
            "Task": _point(task, data.judges),
        }
    return out


def series_records(series: Series) -> list[dict]:
    """Long format for CSV: one dict per (row, point) with the value (x100) and its n."""
    return [{"row": label, "x": x, "value": v, "n": n} for label, pts in series.items() for x, (v, n) in pts.items()]


# --------------------------------------------------------------------------- agreement


def _verdict_labels(data: ReportData) -> dict[tuple[str, str], dict[tuple[str, int], bool | None]]:
    """(run key, target) -> {(judge or verifier scorer, repeat): passed} over checkpoint verdicts."""
    out: dict[tuple[str, str], dict[tuple[str, int], bool | None]] = defaultdict(dict)
    judges = set(data.judge_scorers())
    for run_key, recs in data.scores.items():
        for r in recs:
            if r.scorer in judges:
                for v in r.verdicts:
                    out[(run_key, v.target)][(r.scorer, r.repeat)] = v.passed
            elif r.scorer == "verifiers":
                for v in r.verdicts:
                    out[(run_key, v.target)][("verifiers", 0)] = v.passed
    return out


def agreement_table(data: ReportData) -> Table | None:
    """Agreement between judges (repeat 0), between the repeats of each judge, and of each judge
    with the deterministic verifiers; None when there is nothing to compare."""
    labels = _verdict_labels(data)
    items = list(labels.values())
    judges = data.judge_scorers()
    rows = []

    def add(name: str, columns: list[tuple[str, int]]) -> None:
        mat = [[it.get(c) for c in columns] for it in items]
        mat = [r for r in mat if sum(x is not None for x in r) >= 2]
        if not mat:
            return
        s = agreement_summary(mat)
        rows.append([name, s["raters"], s["items"], s["raw"], s["ac1"], s["cohen"], s["fleiss"], s["alpha"]])

    for a, b in combinations(judges, 2):
        add(f"{_short(a)} vs {_short(b)}", [(a, 0), (b, 0)])
    if len(judges) > 2:
        add(f"panel of {len(judges)} judges", [(j, 0) for j in judges])
    for j in judges:
        reps = sorted({c[1] for it in items for c in it if c[0] == j})
        if len(reps) > 1:
            add(f"{_short(j)}: {len(reps)} repeats", [(j, r) for r in reps])
        add(f"{_short(j)} vs verifiers", [(j, 0), ("verifiers", 0)])
    if not rows:
        return None
    return Table("agreement", "Agreement of judges (checkpoint verdicts)",
                 ["Comparison", "raters", "items", "raw", "AC1", "Cohen \u03ba", "Fleiss \u03ba", "Krippendorff \u03b1"],
                 rows, note="raw = share of agreeing rater pairs; Cohen's kappa is the mean over rater pairs; "
                 "undefined values (one label only) show as \u2013.",
                 label_columns=1, cell_format=lambda v: f"{v:.3f}")


def _short(scorer: str) -> str:
    return scorer.removeprefix("judge:")


__all__ = ["target_passes", "by_evidence", "by_constraints", "static_dynamic", "qa_vs_task", "series_records",
           "agreement_table"]
