"""Score one stored RunRecord against its AnswerKey: the evaluator's single entry point.

The record's kind picks the scorers:
- a QA probe run (RunRecord.probe set)                 -> "qa"
- a call_api task (the key has slots, or an API template) -> "slots"
- a generate task                                        -> "judge:<model_id>" per judge and repeat,
                                                            plus "verifiers" when a checkpoint has one

One ScoreRecord per (run key, scorer, repeat). With a store, pairs already stored are skipped
(re-scoring with other judges never re-runs agents; an interrupted scoring resumes) and each new
record is stored as soon as it exists. A stored pass whose judge call failed (ScoreRecord.errored,
an infrastructure fault) is not final: the next scoring judges its missing verdicts again.

The failure policy (iba.run.failures): a *failed* run (the agent's own failure) scores 0 under
every scorer that applies, each verdict False and the record's `failure` naming why; an
*errored* run (an infrastructure fault) gets records whose score is None: unscored, neither 0 nor
1, shown by reports and run again with `iba run --retry-errored`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Protocol

from iba.eval import qa as qa_mod
from iba.eval import slots as slots_mod
from iba.eval import verifiers as verifiers_mod
from iba.eval.panel import PanelConfig, judge_panel, judge_scorer
from iba.llm.base import Backend
from iba.types import AnswerKey, ApiTemplate, RunRecord, ScoreRecord, Verdict


class ScoreStore(Protocol):
    """What scoring needs of a result store; iba.run.store.Store is one (eval may not import run)."""

    def score_errored(self, run_key: str, scorer: str, repeat: int = 0) -> bool | None: ...

    def get_score(self, run_key: str, scorer: str, repeat: int = 0) -> ScoreRecord | None: ...

    def put_score(self, rec: ScoreRecord, *, replace: bool = False) -> bool: ...


def record_kind(record: RunRecord, key: AnswerKey, api_template: ApiTemplate | None = None) -> str:
    """'qa', 'call_api' or 'generate'."""
    if record.probe is not None:
        return "qa"
    if key.slots or api_template is not None:
        return "call_api"
    return "generate"


def _failed(run_key: str, scorer: str, repeat: int, targets: list[tuple[str, str]], judge: str, why: str,
            failure: str = "agent_failed") -> ScoreRecord:
    verdicts = [Verdict(target=t, kind=k, judge=judge, repeat=repeat, passed=False, rationale=why)  # type: ignore[arg-type]
                for t, k in targets]
    return ScoreRecord(run_key=run_key, scorer=scorer, repeat=repeat, verdicts=verdicts,
                       score=0.0 if verdicts else None, failure=failure,
                       invalid_action=failure == "invalid_action")


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
    store: ScoreStore | None = None,
    concurrency: int = 4,
    panel: PanelConfig | None = None,
    semaphore: asyncio.Semaphore | None = None,
    rescore: bool = False,
) -> list[ScoreRecord]:
    """Compute (and store, with `store`) the ScoreRecords of `record` not yet stored, or stored
    errored (a judge call that failed is judged again, only its missing verdicts); returns them.
    `rescore` computes every one again and replaces the stored ones (`iba score --rescore`).

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
        return store is not None and not rescore and store.score_errored(rk, scorer, repeat) is False

    def previous(scorer: str, repeat: int) -> ScoreRecord | None:
        """A stored pass with errored verdicts: its good verdicts are kept, the rest judged again."""
        if store is None or rescore or not store.score_errored(rk, scorer, repeat):
            return None
        return store.get_score(rk, scorer, repeat)

    def keep(rec: ScoreRecord) -> None:
        out.append(rec)
        if store is not None:
            store.put_score(rec, replace=rescore)

    failed = record.status == "failed" or (record.status == "ok" and record.action is None)
    errored = record.status == "errored"
    first = (record.error or "no action").splitlines()[0][:300]
    failure = "agent_failed"
    if failed:
        why = f"agent failed: {first}"
        failure = "invalid_action" if first.startswith("invalid action") or record.action is not None else "agent_failed"
    else:
        why = f"run errored: {first}"

    def give_up(scorer: str, repeat: int, targets: list[tuple[str, str]], judge: str) -> ScoreRecord:
        if failed:
            return _failed(rk, scorer, repeat, targets, judge, why, failure)
        return _unscored(rk, scorer, repeat, targets, judge, why)

    if kind == "qa":
        if not done(qa_mod.SCORER):
            probe_id = record.probe or ""
            if failed or errored:
                keep(give_up(qa_mod.SCORER, 0, [(probe_id, "qa")], qa_mod.JUDGE))
            else:
                keep(qa_mod.score_qa(record.action.text, key, probe_id, run_key=rk))  # type: ignore[union-attr]
        return out

    if kind == "call_api":
        if not done(slots_mod.SCORER):
            if failed and record.action is not None:
                # an invalid action is still scored by the slot scorer: it says why it is invalid
                keep(slots_mod.score_slots(record.action, key, api_template, run_key=rk))
            elif failed or errored:
                keep(give_up(slots_mod.SCORER, 0, [(s.id, "slot") for s in key.slots], slots_mod.JUDGE))
            else:
                keep(slots_mod.score_slots(record.action, key, api_template, run_key=rk))  # type: ignore[arg-type]
        return out

    # generate
    cps = key.checkpoints
    targets = [(c.id, "checkpoint") for c in cps]
    action = record.action
    has_verifiers = any(c.verifier is not None for c in cps)
    if failed or errored or action is None or action.kind != "generate" or action.text is None:
        if not (failed or errored):  # not a response at all: the agent's failure
            failed, failure = True, "invalid_action"
            why = f"agent failed: invalid action: a {action.kind if action else 'missing'} action on a generate task"
        for b in judges:
            for r in range(cfg.repeats):
                if not done(judge_scorer(b.model_id), r):
                    keep(give_up(judge_scorer(b.model_id), r, targets, b.model_id))
        if has_verifiers and not done(verifiers_mod.SCORER):
            vt = [(c.id, "checkpoint") for c in cps if c.verifier is not None]
            keep(give_up(verifiers_mod.SCORER, 0, vt, "verifiers"))
        return out

    if has_verifiers and not done(verifiers_mod.SCORER):
        rec = verifiers_mod.score_verifiers(action.text, cps, run_key=rk)
        if rec is not None:
            keep(rec)
    if cps and judges:
        await judge_panel(
            action.text, cps, judges, cfg, run_key=rk, skip=done,
            semaphore=semaphore or asyncio.Semaphore(max(1, concurrency)), on_record=keep, previous=previous,
        )
    return out
