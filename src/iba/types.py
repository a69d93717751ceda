"""The data contracts of IBA: the one place where data shapes live.

Everything that crosses a module boundary or touches disk is one of these models.
`extra="forbid"` everywhere, so a misspelt field is an error rather than silently dropped.

Visibility rule: `TaskView` and `Turn` are what an agent sees. `AnswerKey` (checkpoints, slots,
evidence labels, QA probes) is evaluator-only; no agent-facing API may carry it.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

ActionType = Literal["generate", "call_api"]
Role = Literal["user", "assistant"]
# Table 12 of the paper: the four kinds of preference evidence, strongest first.
SignalType = Literal["explicit_revision", "complaint", "direct_statement", "implicit_pattern"]
SIGNAL_TYPES: tuple[str, ...] = ("explicit_revision", "complaint", "direct_statement", "implicit_pattern")
ParamType = Literal["string", "integer", "number", "boolean"]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# --------------------------------------------------------------------------- taxonomy


class VerifierRef(Strict):
    """A deterministic check attached to a preference value (see iba.eval.verifiers)."""

    id: str
    params: dict[str, Any] = Field(default_factory=dict)


class PreferenceValue(Strict):
    """One mutually exclusive value of a dimension.

    A static value has a `cue`: a first-person fragment a user might say or do that reveals the
    value without naming the dimension (the procedural writer builds evidence turns from it), and
    may have `more_cues`: other situations that reveal the same value in other words, so that a
    value revealed several times is not revealed by the same sentence each time.
    A dynamic value ("preferred X; now Y", Table 14) names two static values of the same
    dimension in `from_value` and `to_value`; the answer key then expects `to_value`.
    `api` maps API parameters to the value(s) that satisfy this preference (CallAPI scenarios).
    """

    id: str
    text: str
    cue: str | None = None
    more_cues: list[str] = Field(default_factory=list)
    from_value: str | None = None
    to_value: str | None = None
    verifier: VerifierRef | None = None
    api: dict[str, list[str | int | float | bool]] = Field(default_factory=dict)

    @property
    def dynamic(self) -> bool:
        return self.from_value is not None

    @property
    def all_cues(self) -> list[str]:
        return [self.cue, *self.more_cues] if self.cue else list(self.more_cues)

    @model_validator(mode="after")
    def _shape(self) -> "PreferenceValue":
        if (self.from_value is None) != (self.to_value is None):
            raise ValueError("a dynamic value needs both from_value and to_value")
        if self.from_value is None and not self.cue:
            raise ValueError("a static value needs a cue")
        if self.from_value is not None and self.more_cues:
            raise ValueError("a dynamic value has no cues of its own (its from_value and to_value have them)")
        return self


class Dimension(Strict):
    id: str
    name: str
    values: list[PreferenceValue]

    @property
    def dynamic(self) -> bool:
        return any(v.dynamic for v in self.values)

    def value(self, value_id: str) -> PreferenceValue:
        for v in self.values:
            if v.id == value_id:
                return v
        raise KeyError(f"dimension {self.id!r} has no value {value_id!r}")


class ApiParam(Strict):
    name: str
    type: ParamType = "string"
    description: str = ""
    enum: list[str | int | float | bool] | None = None
    minimum: float | None = None
    maximum: float | None = None
    slot: bool = False  # a personalization slot: scored against the user's preference
    dimension: str | None = None  # the dimension that drives this slot
    required: bool = True


class ApiTemplate(Strict):
    name: str
    description: str = ""
    params: list[ApiParam]
    # normalised synonyms accepted for enum values: {"mild": ["not spicy", "low spice"]}
    synonyms: dict[str, list[str]] = Field(default_factory=dict)

    def json_schema(self) -> dict[str, Any]:
        """The JSON schema an agent's params must satisfy (also used for constrained decoding)."""
        props: dict[str, Any] = {}
        for p in self.params:
            s: dict[str, Any] = {"type": p.type}
            if p.description:
                s["description"] = p.description
            if p.enum is not None:
                s["enum"] = list(p.enum)
            if p.minimum is not None:
                s["minimum"] = p.minimum
            if p.maximum is not None:
                s["maximum"] = p.maximum
            props[p.name] = s
        return {
            "type": "object",
            "properties": props,
            "required": [p.name for p in self.params if p.required],
            "additionalProperties": False,
        }


class Scenario(Strict):
    id: str
    domain: str
    name: str
    action: ActionType
    dynamic: bool
    dimensions: list[Dimension]
    api: ApiTemplate | None = None
    tasks: list[str]  # request templates; {topic} is filled from `topics`
    topics: list[str] = Field(default_factory=list)
    paper_instances: int = 0  # I in the paper's Table 13; the full preset builds this many

    @model_validator(mode="after")
    def _shape(self) -> "Scenario":
        if (self.action == "call_api") != (self.api is not None):
            raise ValueError("call_api scenarios need an api template, generate scenarios none")
        return self


class Domain(Strict):
    id: str
    name: str
    short: str
    scenarios: list[Scenario]


class StateConstraint(Strict):
    scenario: str
    dimension: str
    value: str


class TransientState(Strict):
    """A short-term state (persona E) that implies constraints in other domains."""

    id: str
    description: str
    cues: list[str]
    duration_days: int = 14
    constrains: list[StateConstraint]


class Taxonomy(Strict):
    version: str
    domains: list[Domain]
    states: list[TransientState] = Field(default_factory=list)

    def scenarios(self) -> list[Scenario]:
        return [s for d in self.domains for s in d.scenarios]

    def scenario(self, scenario_id: str) -> Scenario:
        for s in self.scenarios():
            if s.id == scenario_id:
                return s
        raise KeyError(f"unknown scenario {scenario_id!r}")


# --------------------------------------------------------------------------- dataset


class Turn(Strict):
    id: str  # stable, e.g. u0042-s017-t03
    session_id: str
    timestamp: str  # ISO 8601
    role: Role
    text: str


class PersonaStateSpan(Strict):
    state: str  # TransientState id, or free text for LLM-written states
    description: str
    start: str
    end: str


class Persona(Strict):
    """A user as agents may know them (personas.jsonl): B, T and R, what a user would tell an
    assistant about themselves. The transient states E decide state-driven slots and checkpoints,
    so they are answers: they live in the hidden persona_states.jsonl (PersonaStates), beside the
    answer key. `states` holds them in memory on the builder's and the evaluator's side and is
    never written (exclude=True); a personas.jsonl written before the split still loads with them."""

    id: str
    name: str
    background: dict[str, str]  # B: long-term attributes
    traits: list[str]  # T: long-term personality traits
    states: list[PersonaStateSpan] = Field(default_factory=list, exclude=True)  # E: transient, evaluator-side
    role: str  # R: current professional/social role


class PersonaStates(Strict):
    """A persona's transient states E with their dates (persona_states.jsonl): evaluator-only,
    hidden like the answer key."""

    user_id: str
    states: list[PersonaStateSpan]


class TaskView(Strict):
    """Everything an agent is given about a task. Nothing from the answer key."""

    instance_id: str
    user_id: str
    domain: str
    scenario: str
    scenario_name: str
    query: str
    action: ActionType
    api_name: str | None = None
    api_schema: dict[str, Any] | None = None
    now: str  # request time, ISO 8601; the history ends before it


class EvidenceLabel(Strict):
    turn_id: str
    signal_type: SignalType
    dimension: str
    value: str
    timestamp: str
    superseded: bool = False  # evidence of the old value of a changed preference
    # The clause of the turn that reveals the value: text[span[0]:span[1]] == clause. None where the
    # writer cannot say (an LLM-written turn, a dataset built before spans); then the whole turn counts.
    span: tuple[int, int] | None = None
    clause: str | None = None

    @model_validator(mode="after")
    def _span_shape(self) -> "EvidenceLabel":
        _check_span(self.span, self.clause)
        return self


def _check_span(span: tuple[int, int] | None, clause: str | None) -> None:
    if (span is None) != (clause is None):
        raise ValueError("span and clause go together: give both or neither")
    if span is not None and not (0 <= span[0] < span[1] and span[1] - span[0] == len(clause or "")):
        raise ValueError(f"span {list(span)} does not fit a clause of {len(clause or '')} characters")


# How a distractor preference is framed: the user's own preference on a topic none of their tasks
# asks about, another person's, one the user no longer holds, or a hypothetical.
DistractorForm = Literal["own_other_topic", "other_person", "ended", "hypothetical"]


class DistractorLabel(Strict):
    """A preference-shaped user turn that no task of its user depends on: a hard negative for
    retrieval. Evaluator-only (`distractors.jsonl`), like the answer key. Its dimension is never one
    a task of the user is scored on, nor related to one (see iba.construct.distractors)."""

    user_id: str
    turn_id: str
    form: DistractorForm
    scenario: str
    dimension: str
    value: str
    signal_type: SignalType
    span: tuple[int, int] | None = None
    clause: str | None = None

    @model_validator(mode="after")
    def _span_shape(self) -> "DistractorLabel":
        _check_span(self.span, self.clause)
        return self


class Checkpoint(Strict):
    id: str
    dimension: str
    dimension_name: str
    value: str
    expected: str  # the requirement, as a judge reads it
    kind: Literal["static", "dynamic"]
    superseded: str | None = None  # the old value's text when dynamic
    source: Literal["preference", "state"] = "preference"
    evidence: list[str]  # turn ids
    verifier: VerifierRef | None = None


class Slot(Strict):
    id: str
    param: str
    dimension: str
    value: str
    accepted: list[str | int | float | bool]
    kind: Literal["static", "dynamic"] = "static"
    source: Literal["preference", "state"] = "preference"
    evidence: list[str]


class QAProbe(Strict):
    id: str
    target: str  # checkpoint or slot id
    question: str
    options: list[str]
    answer: int  # index into options


class AnswerKey(Strict):
    instance_id: str
    checkpoints: list[Checkpoint] = Field(default_factory=list)
    slots: list[Slot] = Field(default_factory=list)
    evidence: list[EvidenceLabel] = Field(default_factory=list)
    qa: list[QAProbe] = Field(default_factory=list)
    fixed_params: dict[str, Any] = Field(default_factory=dict)  # task-fixed, not scored

    @property
    def n_constraints(self) -> int:
        return len(self.checkpoints) + len(self.slots)

    @property
    def n_evidence(self) -> int:
        return len({e.turn_id for e in self.evidence if not e.superseded})


class Manifest(Strict):
    format: Literal["iba-dataset/1"] = "iba-dataset/1"
    name: str
    generator: str
    writer: str = "procedural"
    seed: int
    taxonomy_version: str
    created_by: str  # iba version
    counts: dict[str, int]
    params: dict[str, Any] = Field(default_factory=dict)

    @property
    def generator_version(self) -> int | None:
        """The construction's version (`params.generator_version`): figures measured on a build say
        which one. None for imports (PrefEval) and builds older than the field."""
        v = self.params.get("generator_version")
        return v if isinstance(v, int) and not isinstance(v, bool) else None


# --------------------------------------------------------------------------- actions and runs


class TraceStep(Strict):
    step: str
    inputs: dict[str, Any] = Field(default_factory=dict)
    outputs: Any = None
    prompt: str | None = None  # template name
    prompt_hash: str | None = None
    # the rendered prompt (its messages' contents joined by blank lines): what the step's model read,
    # so whether a gold evidence clause reached it can be measured later (iba.eval.reach)
    prompt_text: str | None = None
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reused_prompt_tokens: int = 0
    latency_s: float = 0.0
    error: str | None = None
    # the models that answered this step's calls from batch results (iba run --batch), as the results
    # name them: a run's record says which model it asked (RunRecord.model), this which one answered
    answered_by: list[str] | None = None


class Action(Strict):
    kind: ActionType
    text: str | None = None
    api_name: str | None = None
    params: dict[str, Any] | None = None
    trace: list[TraceStep] = Field(default_factory=list)

    @model_validator(mode="after")
    def _shape(self) -> "Action":
        if self.kind == "generate" and self.text is None:
            raise ValueError("a generate action needs text")
        if self.kind == "call_api" and self.params is None:
            raise ValueError("a call_api action needs params")
        return self


class Usage(Strict):
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reused_prompt_tokens: int = 0  # of prompt_tokens, those served from the model's prompt state

    def add(self, other: "Usage") -> "Usage":
        return Usage(
            llm_calls=self.llm_calls + other.llm_calls,
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            reused_prompt_tokens=self.reused_prompt_tokens + other.reused_prompt_tokens,
        )

    @classmethod
    def of_step(cls, step: "TraceStep") -> "Usage":
        return cls(llm_calls=step.llm_calls, prompt_tokens=step.prompt_tokens, completion_tokens=step.completion_tokens,
                   reused_prompt_tokens=step.reused_prompt_tokens)


class RunRecord(Strict):
    key: str  # stable hash of (dataset, instance, agent spec, model, trial)
    run: str  # a user-chosen run name
    dataset: str
    instance_id: str
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


def stable_hash(obj: Any, n: int = 16) -> str:
    """A short content hash of any JSON-able object (sorted keys, so order-independent)."""
    data = json.dumps(obj, sort_keys=True, ensure_ascii=False, default=str).encode()
    return hashlib.sha256(data).hexdigest()[:n]
