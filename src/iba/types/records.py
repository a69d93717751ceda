"""What the store keeps: one RunRecord per run key, IngestRecords of memory agents, ScoreRecords
holding Verdicts (passed=None: unscored)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from iba.types.agent import Action, TraceStep, Usage
from iba.types.common import LEGACY_QA, Strict, split_item_id


class RunRecord(Strict):
    key: str  # stable hash of (dataset, instance and probe, agent spec, model, trial): runner.run_key
    run: str  # a user-chosen run name
    dataset: str
    instance_id: str
    probe: str | None = None  # the QA probe this run asked (iba run --qa), None for the instance's task
    user_id: str
    domain: str
    scenario: str
    agent: str  # agent spec, e.g. "iba" or "iba?retrieval=false"
    model: str
    trial: int = 0
    seed: int = 42
    # ok: a valid action; failed: the agent's own failure (crash, invalid or missing action,
    # unparseable output) -- scored 0 with its reason; errored: an infrastructure fault (model
    # server down, timeout) -- unscored, shown, and run again by `iba run --retry-errored`.
    status: Literal["ok", "failed", "errored"]
    action: Action | None = None
    error: str | None = None  # the failure's or fault's message (status failed or errored)
    # the steps that ran before an agent raised (no action to carry them): what it retrieved and
    # extracted still counts in the report's attribution
    partial_trace: list[TraceStep] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    latency_s: float = 0.0
    prompt_hashes: dict[str, str] = Field(default_factory=dict)
    started_at: str
    iba_version: str
    # a command iba started for a third-party agent (external?cmd=): "bwrap" when it ran sandboxed,
    # "none" when it did not (reports mark the row unsandboxed); None for everything else
    sandbox: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _split_old_qa_id(cls, data: Any) -> Any:
        """A record written before `probe` was a field holds it in its id (types.common.LEGACY_QA)."""
        if isinstance(data, dict) and LEGACY_QA in str(data.get("instance_id")) and data.get("probe") is None:
            instance_id, probe = split_item_id(data["instance_id"])
            return {**data, "instance_id": instance_id, "probe": probe}
        return data


class IngestRecord(Strict):
    """What remembering one user's history cost a memory agent (memory?cmd=/url=): one per (dataset,
    user, agent spec, model, trial), beside the RunRecords of that user's acts, which hold the act
    cost. A user ingested again (its memory process died, or a run stopped mid-ingest) replaces it,
    `attempts` counting the ingests so far."""

    key: str  # stable hash of (dataset, user, agent spec, model, trial)
    run: str
    dataset: str
    user_id: str
    agent: str
    model: str
    trial: int = 0
    seed: int = 42
    # ok: every session acknowledged; failed: the memory's own failure (its tasks fail with it);
    # errored: an infrastructure fault (its tasks are errored, and --retry-errored ingests it again)
    status: Literal["ok", "failed", "errored"]
    sessions: int  # of the history
    ingested: int  # sessions acknowledged
    turns: int  # of the history
    usage: Usage = Field(default_factory=Usage)  # summed from the memory's replies (reset and ingest)
    wall_s: float = 0.0  # from the process start (or reset) to the last session's acknowledgement
    attempts: int = 1
    error: str | None = None
    started_at: str
    iba_version: str
    sandbox: str | None = None


class Verdict(Strict):
    target: str  # checkpoint or slot id
    kind: Literal["checkpoint", "slot", "qa"]
    judge: str  # a model string, "verifier:<id>" or "slot-match"
    repeat: int = 0
    passed: bool | None  # None = unscored (unparseable, or errored), never counted as 0 or 1
    rationale: str = ""
    prompt_hash: str | None = None
    # the judge call failed (server down, 5xx, timeout): an infrastructure fault, not a verdict;
    # the next `iba run` or `iba score` judges it again (an unparseable reply is not errored)
    errored: bool = False
    # the model a batch result names as having answered the judge call (iba run --batch), which
    # `judge` (the model asked) may not be; None for calls answered directly
    answered_by: str | None = None


class ScoreRecord(Strict):
    run_key: str
    scorer: str  # e.g. "judge:local:qwen2.5-coder-0.5b" or "slots"
    repeat: int = 0
    verdicts: list[Verdict]
    score: float | None  # mean over scored targets; None when nothing could be scored
    invalid_action: bool = False
    # why an agent-side failure scored 0: "agent_failed", "invalid_action", "unparseable_answer",
    # "hedged_answer"; None for a normal score or an unscored record
    failure: str | None = None
    usage: Usage = Field(default_factory=Usage)
    # some verdict's judge call failed (Verdict.errored): score None until it is judged again
    errored: bool = False
