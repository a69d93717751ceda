"""Score one stored RunRecord against its AnswerKey: the evaluator's single entry point.

The scorers are registered by name (registry kind "scorers"; DEFAULT_SCORERS, every one, unless a
Task names fewer), and each scores the record kinds it knows:
- a QA probe run (RunRecord.probe set)                 -> "qa"
- a call_api task (the key has slots, or an API template) -> "slots"
- a generate task                                        -> "verifiers" when a checkpoint has one, and
                                                            "judge:<model_id>" per judge and repeat ("judge")

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
from dataclasses import dataclass, field
from typing import Protocol

from iba import registry
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


def api_template_for(record: RunRecord, key: AnswerKey) -> ApiTemplate | None:
    """The API template a task run's slots are checked against (its scenario's, synonyms included):
    for a run of an instance with slots, not for a QA probe. `iba run` and `iba score` both ask here."""
    from iba.taxonomy import scenario_api

    return scenario_api(record.scenario) if key.slots and record.probe is None else None


DEFAULT_SCORERS: tuple[str, ...] = ("qa", "slots", "verifiers", "judge")  # registry "scorers": every one


@dataclass
class Scoring:
    """What one scorer sees of one record: the record and its key, the judges, and the rules every
    scorer shares (a stored pass is skipped; a failed or errored run gets a 0 or an unscored record)."""

    record: RunRecord
    key: AnswerKey
    judges: Sequence[Backend]
    api_template: ApiTemplate | None
    panel: PanelConfig
    semaphore: asyncio.Semaphore
    store: ScoreStore | None
    rescore: bool
    kind: str = ""  # record_kind
    failed: bool = False  # the agent's own failure: 0 under every scorer that applies
    errored: bool = False  # an infrastructure fault: unscored
    why: str = ""
    failure: str = "agent_failed"
    out: list[ScoreRecord] = field(default_factory=list)

    def done(self, scorer: str, repeat: int = 0) -> bool:
        """Stored and final (not errored): skipped."""
        return self.store is not None and not self.rescore and self.store.score_errored(self.record.key, scorer, repeat) is False

    def previous(self, scorer: str, repeat: int) -> ScoreRecord | None:
        """A stored pass with errored verdicts: its good verdicts are kept, the rest judged again."""
        if self.store is None or self.rescore or not self.store.score_errored(self.record.key, scorer, repeat):
            return None
        return self.store.get_score(self.record.key, scorer, repeat)

    def keep(self, rec: ScoreRecord) -> None:
        self.out.append(rec)
        if self.store is not None:
            self.store.put_score(rec, replace=self.rescore)

    def give_up(self, scorer: str, repeat: int, targets: list[tuple[str, str]], judge: str) -> ScoreRecord:
        """A failed run's 0 (every verdict False), or an errored run's unscored record."""
        passed = False if self.failed else None
        verdicts = [Verdict(target=t, kind=k, judge=judge, repeat=repeat, passed=passed, rationale=self.why)  # type: ignore[arg-type]
                    for t, k in targets]
        failure = {"failure": self.failure, "invalid_action": self.failure == "invalid_action"} if self.failed else {}
        return ScoreRecord(run_key=self.record.key, scorer=scorer, repeat=repeat, verdicts=verdicts,
                           score=0.0 if self.failed and verdicts else None, **failure)


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
    scorers: Sequence[str] = DEFAULT_SCORERS,
) -> list[ScoreRecord]:
    """Compute (and store, with `store`) the ScoreRecords of `record` not yet stored, or stored
    errored (a judge call that failed is judged again, only its missing verdicts); returns them.
    `rescore` computes every one again and replaces the stored ones (`iba score --rescore`).

    `scorers`: the registered scorers (registry kind "scorers") to apply, in order; each scores
    only the record kinds it knows. `panel` carries the judging options (seed, temperature, batch);
    `judge_repeats` overrides its repeats. At most `concurrency` judge calls run at once, or pass
    one `semaphore` shared by many records. Judges only ever see the final response text and the
    checkpoints.
    """
    cfg = panel or PanelConfig()
    cfg = PanelConfig(repeats=judge_repeats, seed=cfg.seed, temperature=cfg.temperature,
                      max_tokens=cfg.max_tokens, batch=cfg.batch)
    s = Scoring(record, key, judges, api_template, cfg, semaphore or asyncio.Semaphore(max(1, concurrency)), store,
                rescore, kind=record_kind(record, key, api_template))
    s.failed = record.status == "failed" or (record.status == "ok" and record.action is None)
    s.errored = record.status == "errored"
    first = (record.error or "no action").splitlines()[0][:300]
    s.why = f"agent failed: {first}" if s.failed else f"run errored: {first}"
    if s.failed and (first.startswith("invalid action") or record.action is not None):
        s.failure = "invalid_action"
    action = record.action
    if s.kind == "generate" and not (s.failed or s.errored) and (
            action is None or action.kind != "generate" or action.text is None):
        s.failed, s.failure = True, "invalid_action"  # not a response at all: the agent's failure
        s.why = f"agent failed: invalid action: a {action.kind if action else 'missing'} action on a generate task"
    for name in scorers:
        await registry.resolve("scorers", name)(s)
    return s.out


async def qa_scorer(s: Scoring) -> None:
    """A QA probe run: the probe's expected answer (eval/qa.py)."""
    if s.kind != "qa" or s.done(qa_mod.SCORER):
        return
    probe_id = s.record.probe or ""
    if s.failed or s.errored:
        s.keep(s.give_up(qa_mod.SCORER, 0, [(probe_id, "qa")], qa_mod.JUDGE))
    else:
        s.keep(qa_mod.score_qa(s.record.action.text, s.key, probe_id, run_key=s.record.key))  # type: ignore[union-attr]


async def slots_scorer(s: Scoring) -> None:
    """A call_api task: slot matching (eval/slots.py); an invalid action is still scored: it says why."""
    if s.kind != "call_api" or s.done(slots_mod.SCORER):
        return
    if (s.failed and s.record.action is not None) or not (s.failed or s.errored):
        s.keep(slots_mod.score_slots(s.record.action, s.key, s.api_template, run_key=s.record.key))  # type: ignore[arg-type]
    else:
        s.keep(s.give_up(slots_mod.SCORER, 0, [(c.id, "slot") for c in s.key.slots], slots_mod.JUDGE))


async def verifiers_scorer(s: Scoring) -> None:
    """A generate task's checkpoints that have a deterministic verifier (eval/verifiers.py)."""
    cps = s.key.checkpoints
    if s.kind != "generate" or not any(c.verifier is not None for c in cps) or s.done(verifiers_mod.SCORER):
        return
    if s.failed or s.errored:
        s.keep(s.give_up(verifiers_mod.SCORER, 0, [(c.id, "checkpoint") for c in cps if c.verifier is not None],
                         "verifiers"))
    elif (rec := verifiers_mod.score_verifiers(s.record.action.text, cps, run_key=s.record.key)) is not None:  # type: ignore[union-attr, arg-type]
        s.keep(rec)


async def judges_scorer(s: Scoring) -> None:
    """A generate task's checkpoints, by each judge and repeat (eval/panel.py)."""
    cps = s.key.checkpoints
    if s.kind != "generate":
        return
    if s.failed or s.errored:
        for b in s.judges:
            for r in range(s.panel.repeats):
                if not s.done(judge_scorer(b.model_id), r):
                    s.keep(s.give_up(judge_scorer(b.model_id), r, [(c.id, "checkpoint") for c in cps], b.model_id))
    elif cps and s.judges:
        await judge_panel(s.record.action.text, cps, s.judges, s.panel, run_key=s.record.key, skip=s.done,  # type: ignore[union-attr, arg-type]
                          semaphore=s.semaphore, on_record=s.keep, previous=s.previous)
