"""Score one stored RunRecord against its AnswerKey: the evaluator's single entry point.

The record's kind picks the scorers:
- a QA probe run (instance_id "...::qa::<probe>")       -> "qa"
- a call_api task (the key has slots, or an API template) -> "slots"
- a generate task                                        -> "judge:<model_id>" per judge and repeat,
                                                            plus "verifiers" when a checkpoint has one

One ScoreRecord per (run key, scorer, repeat). With a store, pairs already stored are skipped
(re-scoring with other judges never re-runs agents; an interrupted scoring resumes) and each new
record is stored as soon as it exists. An errored run gets records whose score is None: it is
unscored, neither 0 nor 1, and reports count it as such.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from iba.eval import qa as qa_mod
from iba.eval import slots as slots_mod
from iba.eval import verifiers as verifiers_mod
from iba.eval.panel import PanelConfig, judge_panel, judge_scorer
from iba.llm.base import Backend
from iba.run.store import Store
from iba.types import AnswerKey, ApiTemplate, RunRecord, ScoreRecord, Verdict


def record_kind(record: RunRecord, key: AnswerKey, api_template: ApiTemplate | None = None) -> str:
    """'qa', 'call_api' or 'generate'."""
    if qa_mod.split_qa_id(record.instance_id)[1] is not None:
        return "qa"
    if key.slots or api_template is not None:
        return "call_api"
    return "generate"


def _unscored(run_key: str, scorer: str, repeat: int, targets: list[tuple[str, str]], judge: str, why: str) -> ScoreRecord:
    verdicts = [Verdict(target=t, kind=k, judge=judge, repeat=repeat, passed=None, rationale=why)  # type: ignore[arg-type]
                for t, k in targets]
    return ScoreRecord(run_key=run_key, scorer=scorer, repeat=repeat, verdicts=verdicts, score=None)


async def score_record(
    record: RunRecord,
    key: AnswerKey,
    *,
    judges: Sequence[Backend],
    judge_repeats: int = 1,
    api_template: ApiTemplate | None = None,
    store: Store | None = None,
    concurrency: int = 4,
    panel: PanelConfig | None = None,
    semaphore: asyncio.Semaphore | None = None,
) -> list[ScoreRecord]:
    """Compute (and store, with `store`) the ScoreRecords of `record` not yet stored; returns them.

    `panel` carries the judging options (seed, temperature, batch); `judge_repeats` overrides its
    repeats. At most `concurrency` judge calls run at once, or pass one `semaphore` shared by many
    records. Judges only ever see the final response text and the checkpoints.
    """
    cfg = panel or PanelConfig()
    cfg = PanelConfig(repeats=judge_repeats, seed=cfg.seed, temperature=cfg.temperature,
                      max_tokens=cfg.max_tokens, batch=cfg.batch)
    kind = record_kind(record, key, api_template)
    rk = record.key
    out: list[ScoreRecord] = []

    def done(scorer: str, repeat: int = 0) -> bool:
        return store is not None and store.has_score(rk, scorer, repeat)

    def keep(rec: ScoreRecord) -> None:
        out.append(rec)
        if store is not None:
            store.put_score(rec)

    errored = record.status != "ok" or record.action is None
    why = f"run errored: {(record.error or 'no action').splitlines()[0][:300]}"

    if kind == "qa":
        if not done(qa_mod.SCORER):
            probe_id = qa_mod.split_qa_id(record.instance_id)[1] or ""
            if errored:
                keep(_unscored(rk, qa_mod.SCORER, 0, [(probe_id, "qa")], qa_mod.JUDGE, why))
            else:
                keep(qa_mod.score_qa(record.action.text, key, probe_id, run_key=rk))  # type: ignore[union-attr]
        return out

    if kind == "call_api":
        if not done(slots_mod.SCORER):
            if errored:
                keep(_unscored(rk, slots_mod.SCORER, 0, [(s.id, "slot") for s in key.slots], slots_mod.JUDGE, why))
            else:
                keep(slots_mod.score_slots(record.action, key, api_template, run_key=rk))  # type: ignore[arg-type]
        return out

    # generate
    cps = key.checkpoints
    targets = [(c.id, "checkpoint") for c in cps]
    action = record.action
    has_verifiers = any(c.verifier is not None for c in cps)
    if errored or action is None:
        for b in judges:
            for r in range(cfg.repeats):
                if not done(judge_scorer(b.model_id), r):
                    keep(_unscored(rk, judge_scorer(b.model_id), r, targets, b.model_id, why))
        if has_verifiers and not done(verifiers_mod.SCORER):
            vt = [(c.id, "checkpoint") for c in cps if c.verifier is not None]
            keep(_unscored(rk, verifiers_mod.SCORER, 0, vt, "verifiers", why))
        return out
    if action.kind != "generate" or action.text is None:
        # not a response at all: every checkpoint fails, flagged like an invalid API call
        reason = f"invalid action: a {action.kind} action on a generate task"
        for b in judges:
            for r in range(cfg.repeats):
                if not done(judge_scorer(b.model_id), r):
                    vs = [Verdict(target=c.id, kind="checkpoint", judge=b.model_id, repeat=r, passed=False,
                                  rationale=reason) for c in cps]
                    keep(ScoreRecord(run_key=rk, scorer=judge_scorer(b.model_id), repeat=r, verdicts=vs,
                                     score=0.0 if vs else None, invalid_action=True))
        return out

    if has_verifiers and not done(verifiers_mod.SCORER):
        rec = verifiers_mod.score_verifiers(action.text, cps, run_key=rk)
        if rec is not None:
            keep(rec)
    if cps and judges:
        await judge_panel(
            action.text, cps, judges, cfg, run_key=rk, skip=done,
            semaphore=semaphore or asyncio.Semaphore(max(1, concurrency)), on_record=keep,
        )
    return out
