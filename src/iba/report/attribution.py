"""Per-checkpoint/slot attribution: did the agent keep the gold evidence, did it reach the prompt
of the step that decides, did the agent name the preference, and apply it? The knowledge-to-action
gap, measured per target instead of by separate QA probes.

One *target* is one checkpoint (Generate) or slot (CallAPI) of one trial of one compared instance
(`ReportData.compared`, the instances every row scored). For each:

- retrieved: any of the target's gold evidence turn ids (`Checkpoint.evidence` / `Slot.evidence`)
  is among the turns the agent *kept* for its answer: the passages the salience reranker retained
  (the last `rerank_salience` step: iba, iba-fc), not everything its searches returned; without a
  rerank step, the union of the `similarity_retrieve` results (rag, iba?retrieval=false).
  None (not attributable) when the trace records no retrieval (direct, external agents, errored
  runs, failed runs that raised before retrieving) or the target has no located gold evidence.
  A failed run's steps before it raised are read from `RunRecord.partial_trace`.
- reached: the target's gold evidence clause (the answer key's clause, else the whole gold turn)
  appears whole in the prompt of a step that decides it (iba.eval.reach: extract, align,
  align_slot, synthesize; rag and direct: their one prompt). None when the trace recorded no
  deciding prompt (runs stored before prompts were recorded, external agents) or no clause is located.
- named: the agent's extracted preferences (the last `extract_preferences` step: the resolved
  current preferences, else the raw extraction) name the gold value; see `names`. None when the
  trace has no extraction step (rag, iba?btda=false).
- applied: the target's pass value in [0,1] (`analyses.target_passes`: mean over judges of the
  mean over repeats; CallAPI the slot verdict). Cells are sums of these values, so with one judge
  and one repeat they are plain counts and with a panel a split verdict counts half each way.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from iba.eval.reach import deciding_prompts, gold_clauses, reached as clause_reached, target_params
from iba.report.analyses import target_passes
from iba.report.data import ReportData, RowKey
from iba.report.table_value import DASH, Table
from iba.types import AnswerKey, TraceStep

MIN_PREFIX = 4  # shortest token that may match another by prefix (table~tables, spec~specification)


@dataclass(frozen=True)
class Target:
    row: RowKey
    dataset: str
    instance_id: str
    trial: int
    target: str
    kind: str  # checkpoint | slot
    retrieved: bool | None
    reached: bool | None
    named: bool | None
    applied: float  # pass value in [0, 1]


@dataclass(frozen=True)
class Share:
    """A (possibly fractional) count with its share of a total, printed "2.5 (31.2%)"."""

    count: float
    total: int

    def __str__(self) -> str:
        pct = f" ({100 * self.count / self.total:.1f}%)" if self.total else ""
        return f"{round(self.count, 2):g}{pct}"


# --------------------------------------------------------------------------- reading traces


def kept_turns(steps: Sequence[TraceStep]) -> set[str] | None:
    """Turn ids the agent kept for its answer, or None when the trace records no retrieval."""
    rerank = [s for s in steps if s.step == "rerank_salience" and isinstance(s.outputs, dict)
              and isinstance(s.outputs.get("retained"), list)]
    if rerank:
        return _turn_ids(rerank[-1].outputs["retained"])
    hits = [s for s in steps if s.step == "similarity_retrieve" and isinstance(s.outputs, list)]
    if hits:
        return set().union(*(_turn_ids(s.outputs) for s in hits))
    return None


def _turn_ids(passages: Iterable[Any]) -> set[str]:
    return {str(t) for p in passages if isinstance(p, dict) for t in p.get("turn_ids") or []}


def preference_text(steps: Sequence[TraceStep]) -> str | None:
    """The aspects and values of the agent's extracted preferences, or None without that step."""
    ext = [s for s in steps if s.step == "extract_preferences" and isinstance(s.outputs, dict)]
    if not ext:
        return None
    out = ext[-1].outputs
    resolved = out.get("resolved")
    prefs = resolved.get("current") if isinstance(resolved, dict) else None
    if prefs is None:
        extracted = out.get("extracted")
        prefs = extracted.get("preferences", []) if isinstance(extracted, dict) else []
    return " ".join(f"{p.get('aspect', '')} {p.get('value', '')}" for p in prefs if isinstance(p, dict))


def _tokens(text: str) -> list[str]:
    return re.sub(r"[^0-9a-z]+", " ", text.lower()).split()


def _same(a: str, b: str) -> bool:
    short, long_ = sorted((a, b), key=len)
    return a == b or (len(short) >= MIN_PREFIX and long_.startswith(short))


def names(text: str, phrases: Iterable[str]) -> bool:
    """Whether `text` names any phrase: lower-cased, split on non-alphanumerics (so the value id
    "table_spec" is the phrase "table spec"), every token of the phrase matches a token of the text
    (equal, or one a prefix of the other with at least MIN_PREFIX characters)."""
    words = _tokens(text)
    for phrase in phrases:
        toks = _tokens(phrase)
        if toks and all(any(_same(t, w) for w in words) for t in toks):
            return True
    return False


def _gold(key: AnswerKey) -> dict[str, tuple[str, list[str], list[str]]]:
    """target id -> (kind, gold evidence turn ids, phrases naming its gold value)."""
    out = {c.id: ("checkpoint", c.evidence, [c.value]) for c in key.checkpoints}
    for s in key.slots:
        accepted = [str(a) for a in s.accepted if not isinstance(a, bool)]
        out[s.id] = ("slot", s.evidence, [s.value, *accepted])
    return out


# --------------------------------------------------------------------------- per target


def attribute(data: ReportData) -> list[Target]:
    """One Target per scored checkpoint/slot of every trial of every compared instance with a key."""
    out = []
    for inst in data.compared:
        if inst.key is None:
            continue
        gold = _gold(inst.key)
        clauses: dict[str, list[str]] | None = None
        params = target_params(inst.key)
        for run in inst.trials:
            steps = run.action.trace if run.action is not None else run.partial_trace
            kept, prefs, prompts = kept_turns(steps), preference_text(steps), deciding_prompts(steps)
            if prompts and clauses is None:
                clauses = _clauses(data, inst.dataset, run.user_id, inst.key)
            for tid, value in target_passes(inst, run, data.judges).items():
                if tid not in gold:
                    continue
                kind, evidence, phrases = gold[tid]
                retrieved = None if kept is None or not evidence else bool(kept & set(evidence))
                reached = clause_reached(clauses.get(tid, []), prompts, params.get(tid)) if prompts and clauses else None
                named = None if prefs is None else names(prefs, phrases)
                out.append(Target(inst.row, inst.dataset, inst.instance_id, run.trial, tid, kind, retrieved, reached,
                                  named, value))
    return out


def _clauses(data: ReportData, dataset: str, user_id: str, key: AnswerKey) -> dict[str, list[str]]:
    """The key's gold clauses; whole gold turns come from the dataset's history (none without it)."""
    ds = data.datasets.get(dataset)
    turns = {t.id: t for t in ds.history(user_id)} if ds is not None else {}
    return gold_clauses(key, turns)


def target_records(targets: list[Target]) -> list[dict]:
    """Long format for attribution_targets.csv: one dict per target."""
    return [{"row": t.row.label, "dataset": t.dataset, "instance_id": t.instance_id, "trial": t.trial,
             "target": t.target, "kind": t.kind, "retrieved": _yn(t.retrieved), "reached": _yn(t.reached), "named": _yn(t.named),
             "applied": t.applied} for t in targets]


def _yn(v: bool | None) -> str:
    return "" if v is None else "yes" if v else "no"


# --------------------------------------------------------------------------- the table

COLUMNS = ["Agent (model)", "targets", "attributable", "retrieved & applied", "retrieved, not applied",
           "not retrieved, applied", "not retrieved, not applied", "retrieved", "\u2192 reached", "\u2192 named",
           "\u2192 applied", "reached", "applied"]


def _pct(num: float, den: int) -> float | str:
    return 100.0 * num / den if den else DASH


def row_cells(targets: list[Target]) -> list[Any]:
    """The table's cells after the label for one row's targets (see COLUMNS)."""
    att = [t for t in targets if t.retrieved is not None]
    n, m = len(targets), len(att)
    applied = _pct(sum(t.applied for t in targets), n)
    measured = [t for t in targets if t.reached is not None]
    reach = _pct(sum(bool(t.reached) for t in measured), len(measured)) if measured else DASH
    if not att:
        return [n, DASH, DASH, DASH, DASH, DASH, DASH, DASH, DASH, DASH, reach, applied]
    r = [t for t in att if t.retrieved]
    nr = [t for t in att if not t.retrieved]
    cells: list[Any] = [n, m, Share(sum(t.applied for t in r), m), Share(sum(1 - t.applied for t in r), m),
                        Share(sum(t.applied for t in nr), m), Share(sum(1 - t.applied for t in nr), m),
                        _pct(len(r), m)]
    # the funnel: each later stage among the targets that passed the earlier ones; a stage the row's
    # traces cannot show (no deciding prompt recorded, no extraction step) is skipped with a dash
    chain, shown = r, False
    for stage in ("reached", "named"):
        if all(getattr(t, stage) is None for t in att):
            cells.append(DASH)
            continue
        # a run that skipped the stage (iba-fc may skip extraction) did not pass it
        chain = [t for t in chain if getattr(t, stage)]
        cells.append(_pct(len(chain), m))
        shown = True
    cells.append(_pct(sum(t.applied for t in chain), m) if shown else DASH)
    return cells + [reach, applied]


def attribution_table(data: ReportData, targets: list[Target] | None = None) -> Table | None:
    """Retrieved x applied per row, with the retrieved -> named -> applied funnel; None when no
    compared instance has an answer key (no --dataset)."""
    if not any(i.key is not None for i in data.compared):
        return None
    targets = attribute(data) if targets is None else targets
    by_row: dict[RowKey, list[Target]] = {row: [] for row in data.rows}
    for t in targets:
        by_row[t.row].append(t)
    rows = [[row.label] + row_cells(by_row[row]) for row in data.rows]
    partial = [f"{row.label}: {sum(t.retrieved is None for t in ts)} of {len(ts)}" for row, ts in by_row.items()
               if any(t.retrieved is None for t in ts) and any(t.retrieved is not None for t in ts)]
    note = (
        "A target is one checkpoint or slot, with a scored verdict, of one trial of a compared instance. retrieved = a gold evidence turn "
        "of the target is among the passages the agent kept for its answer (the reranker's retained passages when "
        "the trace has them, not every search hit; else the similarity-search results). reached = the target's gold "
        "evidence clause (the answer key's clause, else the whole gold turn) appears whole in the prompt of a step that "
        "decides it (extract, align, align_slot, synthesize; rag and direct: their one prompt); the reached column is "
        "its share of every target whose run recorded a deciding prompt (iba's evidence views may also show turns of "
        "candidates the reranker did not keep, so it can exceed retrieved). named = the agent's "
        "extracted preferences contain the gold value (lower-cased tokens; each token of the value equal to, or a "
        f"prefix of at least {MIN_PREFIX} characters of, a token of the preferences). applied = the verdict (mean over "
        "judges of the mean over repeats), so cells are sums of pass values. The four cells and the funnel "
        "(retrieved, \u2192 also reached, \u2192 also named, \u2192 and applied) are shares of the attributable targets; "
        "applied is the share of all targets. Rows without a retrieval trace (direct, external agents) show only "
        "reached and applied; a funnel stage the row's traces cannot show (no recorded prompt, no preference "
        "extraction) is \u2013 and skipped. "
        + (f"Not attributable (no retrieval in the trace, as for runs that failed before retrieving, or no located gold evidence): {'; '.join(partial)}. "
           if partial else "")
        + data.left_out_note()
    )
    return Table("attribution", "Attribution: retrieved \u2192 reached \u2192 named \u2192 applied per checkpoint/slot", COLUMNS, rows,
                 note=note, rank_columns=[], cell_format=lambda v: f"{v:.1f}")


__all__ = ["Target", "Share", "kept_turns", "preference_text", "names", "attribute", "target_records", "row_cells",
           "attribution_table"]
