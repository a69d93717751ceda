"""The paper's tables from stored runs: Table 4 (domains), per scenario, Table 5 (ablations),
Table 9 (mean ± sd over replicates), the cost and effort summary, and the uncertainty tables
(bootstrap intervals, paired differences); the attribution table lives in attribution.py.

Every score is an instance score from `iba.eval.aggregate.instance_score` (mean over trials),
shown x100 with one decimal. Rows are compared on the same instances (the
intersection of what every row scored, `ReportData.compared`); an agent's own failures count as 0 there, and the notes
say how many instances were left out and why (errored, unscored, not run: left_out.csv).
"""

from __future__ import annotations

from collections import defaultdict

from iba.eval.aggregate import mean, pass_hat_k, replicate_score
from iba.eval.panel import mean_sd
from iba.eval.slots import chance_score
from iba.report.attribution import attribution_table
from iba.report.data import Instance, ReportData, RowKey
from iba.report.intervals import N_BOOT, Interval, bootstrap_ci, paired
from iba.report.table_value import Delta, MeanSd, Table
from iba.taxonomy import scenario_api

OVERALL = "Overall"


def _pct(v: float | None) -> float | None:
    return None if v is None else 100.0 * v


def _cell(instances: list[Instance], judges: list[str] | None) -> dict:
    scores = [i.score(judges) for i in instances]
    scored = [s for s in scores if s is not None]
    return {"score": _pct(mean(scored)), "n": len(scores), "unscored": len(scores) - len(scored)}


def _by_row(data: ReportData) -> dict[RowKey, list[Instance]]:
    out: dict[RowKey, list[Instance]] = defaultdict(list)
    for inst in data.compared:
        out[inst.row].append(inst)
    return out


# --------------------------------------------------------------------------- Table 4


def table4_cells(data: ReportData) -> list[dict]:
    """Long format: one dict per (row, domain or Overall) with score (x100), n and unscored."""
    out = []
    by_row = _by_row(data)
    for row in data.rows:
        insts = by_row[row]
        for d in data.domains() + [OVERALL]:
            sel = insts if d == OVERALL else [i for i in insts if i.domain == d]
            c = _cell(sel, data.judges)
            out.append({"row": row.label, "run": row.run, "agent": row.agent, "model": row.model,
                        "domain": d if d == OVERALL else data.short(d), **c, "reference": row.reference or ""})
    return out


def table4(data: ReportData) -> Table:
    """One row per agent x model, one column per domain (paper short names) plus Overall
    (the mean over all of the row's instances, not the mean of the domain columns)."""
    domains = data.domains()
    cells = {(c["row"], c["domain"]): c for c in table4_cells(data)}
    cols = [data.short(d) for d in domains] + [OVERALL]
    rows = [[row.label] + [cells[(row.label, c)]["score"] for c in cols] for row in data.rows]
    note = "Scores x100 (mean over instances; an agent's own failures score 0). " + data.left_out_note()
    note += (" " + data.sample_note()) if data.samples else ""
    if any(r.reference for r in data.rows):
        note += " Rows marked [reference: ...] are not systems: the direct prompt with no history, the full context, or the gold evidence turns."
    return Table("table4", "Table 4: score by domain", ["Agent (model)"] + cols, rows, note=note,
                 rank_columns=list(range(1, len(cols) + 1)))


# --------------------------------------------------------------------------- per scenario


def scenario_table(data: ReportData) -> Table:
    by_row = _by_row(data)
    order = {d: i for i, d in enumerate(data.domains())}
    scen: dict[tuple[str, str], str] = {}
    for inst in data.instances:
        name = inst.task.scenario_name if inst.task else inst.scenario
        scen[(inst.domain, inst.scenario)] = name
    keys = sorted(scen, key=lambda k: (order.get(k[0], 99), k[1]))
    rows = []
    for dom, sid in keys:
        line: list = [data.short(dom), scen[(dom, sid)]]
        n = 0
        for row in data.rows:
            sel = [i for i in by_row[row] if i.domain == dom and i.scenario == sid]
            n = max(n, len(sel))
            line.append(_cell(sel, data.judges)["score"])
        rows.append(line[:2] + [n] + line[2:])
    return Table("scenarios", "Score by scenario", ["Domain", "Scenario", "n"] + [r.label for r in data.rows], rows,
                 note="Scores x100 on the instances every row scored; n = instances per scenario.", label_columns=3,
                 rank_columns=[])


# --------------------------------------------------------------------------- Table 5


def _base_spec(agent: str) -> str:
    return agent.partition("?")[0]


def ablation_table(data: ReportData) -> Table | None:
    """Table 5: each agent spec with options (e.g. `iba?retrieval=false`) against the plain spec
    (`iba`) of the same model and run; None when no such pair is present."""
    domains = data.domains()
    cols = [data.short(d) for d in domains] + [OVERALL]
    cells = {(c["row"], c["domain"]): c["score"] for c in table4_cells(data)}
    rows = []
    for base in data.rows:
        if "?" in base.agent:
            continue
        variants = [r for r in data.rows if "?" in r.agent and _base_spec(r.agent) == base.agent
                    and r.model == base.model and r.run == base.run]
        if not variants:
            continue
        rows.append([base.label] + [cells[(base.label, c)] for c in cols])
        for v in variants:
            line: list = [v.agent]
            for c in cols:
                val, ref = cells[(v.label, c)], cells[(base.label, c)]
                line.append(Delta(val, None if val is None or ref is None else val - ref))
            rows.append(line)
    if not rows:
        return None
    return Table("table5", "Table 5: ablations (difference to the full agent)", ["Variant"] + cols, rows,
                 note="Scores x100; arrows give the change against the plain agent spec of the same model.")


# --------------------------------------------------------------------------- Table 9


def _replicates(data: ReportData, judge: str | None) -> list[tuple[int, int]]:
    """(trial, repeat) pairs present: repeats of `judge`, or repeat 0 only for panel scores."""
    trials = sorted({r.trial for r in data.runs})
    if judge is None:
        return [(t, 0) for t in trials]
    repeats = sorted({s.repeat for v in data.scores.values() for s in v if s.scorer == judge})
    return [(t, r) for t in trials for r in repeats]


def _replicate_cell(insts: list[Instance], trial: int, repeat: int, judge: str | None,
                    judges: list[str] | None) -> float | None:
    vals = []
    for inst in insts:
        run = next((r for r in inst.trials if r.trial == trial), None)
        if run is None:
            continue
        recs = inst.scores.get(run.key, [])
        vals.append(inst.trial_score(run, judges) if judge is None
                    else replicate_score(inst.kind, recs, repeat, judge))
    return _pct(mean(vals))


def table9(data: ReportData) -> list[Table]:
    """Mean ± sample sd over replicates, one table per judge with several repeats (replicate =
    trial x repeat of that judge alone, as in the paper's Table 9), plus one over agent trials with
    the panel score when runs have several trials."""
    out = []
    candidates: list[str | None] = [j for j in data.judge_scorers()
                                    if len({r for _, r in _replicates(data, j)}) > 1]
    if len({r.trial for r in data.runs}) > 1:
        candidates.append(None)
    domains = data.domains()
    cols = [data.short(d) for d in domains] + [OVERALL]
    by_row = _by_row(data)
    for judge in candidates:
        reps = _replicates(data, judge)
        rows = []
        for row in data.rows:
            line: list = [row.label]
            for d in domains + [OVERALL]:
                sel = by_row[row] if d == OVERALL else [i for i in by_row[row] if i.domain == d]
                vals = [_replicate_cell(sel, t, r, judge, data.judges) for t, r in reps]
                m, sd = mean_sd(vals)
                line.append(MeanSd(m, sd, len([v for v in vals if v is not None])))
            rows.append(line)
        who = judge.removeprefix("judge:") if judge else "judge panel"
        name = "table9" if judge is None else f"table9_{_slug(who)}"
        out.append(Table(name, f"Table 9 style: mean \u00b1 sample sd over {len(reps)} replicates ({who})",
                         ["Agent (model)"] + cols, rows,
                         note="Replicates are (agent trial, judge repeat) pairs; sd uses n - 1."))
    return out


def _slug(text: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in text).strip("_")


# --------------------------------------------------------------------------- cost


def cost_table(data: ReportData) -> Table:
    """Effort per agent x model: agent LLM calls and tokens, wall time, plus judging cost."""
    by_row: dict[RowKey, list] = defaultdict(list)
    for r in data.runs + data.qa_runs:
        by_row[data.row_keys[r.key]].append(r)
    rows = []
    for row in data.rows:
        recs = by_row[row]
        task = [r for r in recs if r.probe is None]
        calls = sum(r.usage.llm_calls for r in recs)
        pt = sum(r.usage.prompt_tokens for r in recs)
        reused = sum(r.usage.reused_prompt_tokens for r in recs)
        ct = sum(r.usage.completion_tokens for r in recs)
        wall = sum(r.latency_s for r in recs)
        judge = [s for r in recs for s in data.scores.get(r.key, []) if s.scorer.startswith("judge:")]
        ingests = data.ingests_of(row)
        rows.append([
            row.label, len(task), len(recs) - len(task), sum(r.status == "errored" for r in recs), calls, pt, reused, ct,
            round(wall, 1), round(wall / len(recs), 2) if recs else None,
            sum(s.usage.llm_calls for s in judge), sum(s.usage.prompt_tokens + s.usage.completion_tokens for s in judge),
            *_ingest_cells(ingests),
        ])
    cols = ["Agent (model)", "task runs", "QA runs", "errored", "LLM calls", "prompt tokens", "of which reused",
            "completion tokens",
            "wall s", "s / run", "judge calls", "judge tokens"]
    note = ("Agent figures cover task and QA runs; judge figures are the scoring calls. 'Of which reused': "
            "prompt tokens the model did not compute again (prompt state shared with an earlier call).")
    if data.ingests:
        cols += ["users ingested", "ingest LLM calls", "ingest prompt tokens", "ingest completion tokens", "ingest wall s"]
        note += (" Memory agents (memory?cmd=/url=): the agent figures are the acts' (answering); the ingest columns "
                 "are remembering each user's history once, as the memory reported it (its replies' usage) and the "
                 "wall time iba measured; a user ingested again after a lost session counts its latest ingest.")
    else:
        rows = [r[:len(cols)] for r in rows]
    return Table("cost", "Cost and effort", cols, rows, note=note, cell_format=lambda v: f"{v:g}")


def _ingest_cells(ingests: list) -> list:
    """A row's ingest columns: blank for an agent that ingests nothing (every agent but memory)."""
    if not ingests:
        return [None] * 5
    return [len(ingests), sum(i.usage.llm_calls for i in ingests), sum(i.usage.prompt_tokens for i in ingests),
            sum(i.usage.completion_tokens for i in ingests), round(sum(i.wall_s for i in ingests), 1)]


# --------------------------------------------------------------------------- uncertainty


def score_intervals(data: ReportData) -> dict[RowKey, dict[str, Interval | None]]:
    """row -> {domain short name or Overall: 95% percentile-bootstrap interval of the mean
    instance score over the row's compared instances (None: no instance)}. The ci table prints the
    Overall entries and fig4 draws all of them, so the plot and the table cannot disagree."""
    domain_of = {(i.dataset, i.instance_id): i.domain for i in data.compared}
    by_row = data.compared_scores
    out: dict[RowKey, dict[str, Interval | None]] = {}
    for row in data.rows:
        scores = by_row[row]
        cells = {data.short(d): bootstrap_ci([s for k, s in scores.items() if domain_of[k] == d])
                 for d in data.domains()}
        cells[OVERALL] = bootstrap_ci(list(scores.values()))
        out[row] = cells
    return out


def ci_table(data: ReportData) -> Table:
    """Overall score per row with a 95% percentile-bootstrap interval over instances."""
    intervals = score_intervals(data)
    k = max((len(i.trials) for i in data.compared), default=1)
    rows = []
    for row in data.rows:
        ci = intervals[row][OVERALL]
        line = [row.label, 0 if ci is None else ci.n, None if ci is None else round(100 * ci.mean, 1),
                None if ci is None else f"[{100 * ci.lo:.1f}, {100 * ci.hi:.1f}]"]
        if k > 1:
            line.append(_pass_hat_k(data, row, k))
        rows.append(line)
    cols = ["Agent (model)", "n", "Overall", "95% CI"] + ([f"pass^{k}"] if k > 1 else [])
    return Table("ci", "Overall score with 95% bootstrap interval", cols, rows,
                 note="Percentile bootstrap over the compared instances (2,000 resamples, seed 0). "
                      + (f"pass^{k} (tau-bench's, unbiased): x100, the chance that {k} trials drawn from an instance's all score "
                         "1.0 (every checkpoint or slot satisfied). " if k > 1 else "")
                      + chance_note(data) + data.left_out_note(), rank_columns=[], cell_format=lambda v: f"{v:g}")


def chance_note(data: ReportData) -> str:
    """A sentence on the floor of the CallAPI scores: what a uniform random valid choice per slot
    would score on the compared instances (eval.slots.chance_score); empty without CallAPI ones."""
    seen: dict[tuple[str, str], float | None] = {}
    for i in data.compared:
        if i.kind == "call_api" and i.key is not None and i.task is not None and (i.dataset, i.instance_id) not in seen:
            seen[(i.dataset, i.instance_id)] = chance_score(i.key, i.task.api_schema, scenario_api(i.task.scenario))
    floors = [v for v in seen.values() if v is not None]
    if not floors:
        return ""
    return (f"Chance: a uniform random choice among each slot's allowed values would score "
            f"{100 * sum(floors) / len(floors):.1f} on the {len(floors)} CallAPI instance(s) compared. ")


def score_bars(data: ReportData) -> tuple[dict[str, dict[str, tuple[float | None, int]]],
                                          dict[str, dict[str, tuple[float, float]]]]:
    """What fig4 draws: (series {row label: {domain or Overall: (score x100, n)}}, intervals
    {row label: {same x: (lo x100, hi x100)}}), from `score_intervals`."""
    series: dict[str, dict[str, tuple[float | None, int]]] = {}
    bounds: dict[str, dict[str, tuple[float, float]]] = {}
    for row, cells in score_intervals(data).items():
        series[row.label] = {x: (None, 0) if ci is None else (100 * ci.mean, ci.n) for x, ci in cells.items()}
        bounds[row.label] = {x: (100 * ci.lo, 100 * ci.hi) for x, ci in cells.items() if ci is not None}
    return series, bounds


def _pass_hat_k(data: ReportData, row: RowKey, k: int) -> float | None:
    """pass^k x100 over the row's compared instances with k trials (eval.aggregate.pass_hat_k)."""
    scored = ([s for r in i.trials if (s := i.trial_score(r, data.judges)) is not None] for i in data.compared if i.row == row)
    p = pass_hat_k(scored, k)
    return None if p is None else round(100 * p, 1)


def _boot_p(p: float) -> float | str:
    # 2,000 resamples cannot resolve a two-sided p below 2/2000: say so rather than print 0
    return f"<{2 / N_BOOT:g}" if p == 0 else round(p, 4)


def paired_table(data: ReportData) -> Table | None:
    """Every pair of rows on the same instances: the difference, its paired bootstrap interval,
    wins/losses/ties and two paired tests (exact sign test, paired bootstrap)."""
    scores = data.compared_scores
    rows = []
    labels = data.rows
    for i, a in enumerate(labels):
        for b in labels[i + 1:]:
            common = sorted(set(scores[a]) & set(scores[b]))
            res = paired([scores[a][k] for k in common], [scores[b][k] for k in common])
            if res is None:
                continue
            rows.append([f"{a.label} \u2212 {b.label}", res.diff.n, round(100 * res.diff.mean, 1),
                         f"[{100 * res.diff.lo:.1f}, {100 * res.diff.hi:.1f}]",
                         f"{res.wins}/{res.losses}/{res.ties}", round(res.p_sign, 4), _boot_p(res.p_boot)])
    if not rows:
        return None
    return Table("paired", "Paired differences (same instances)",
                 ["A \u2212 B", "n", "diff", "95% CI", "wins/losses/ties", "sign test p", "bootstrap p"], rows,
                 note="Score points x100 of A minus B per instance; intervals and p from 2,000 paired "
                      "bootstrap resamples of instances (seed 0); the sign test is exact and two-sided.",
                 rank_columns=[], cell_format=lambda v: f"{v:g}")


def all_tables(data: ReportData) -> list[Table]:
    out = [table4(data), ci_table(data), paired_table(data), attribution_table(data), scenario_table(data),
           ablation_table(data), *table9(data), cost_table(data)]
    return [t for t in out if t is not None]


__all__: list[str] = ["table4", "table4_cells", "scenario_table", "ablation_table", "table9", "cost_table",
                      "ci_table", "score_intervals", "score_bars", "paired_table",
                      "all_tables"]
