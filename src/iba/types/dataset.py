"""The dataset's contracts: what its files hold. `TaskView` and `Turn` are what an agent sees;
`AnswerKey` (checkpoints, slots, evidence labels, QA probes), distractor labels and persona states are
evaluator-only: no agent-facing API may carry them."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_serializer, model_validator

from iba.types.common import ActionType, Role, SignalType, Strict
from iba.types.taxonomy import VerifierRef


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
    probe: str | None = None  # a QA probe's id (iba run --qa): the query is its question, not the task

    @model_serializer(mode="wrap")
    def _no_null_probe(self, handler: Any) -> Any:  # no "probe" key in a task's JSON: files, requests as before
        out = handler(self)
        return {k: v for k, v in out.items() if k != "probe"} if self.probe is None and isinstance(out, dict) else out


class _Spanned(Strict):
    """A label with an optional clause of its turn: text[span[0]:span[1]] == clause (fields in the subclass)."""

    @model_validator(mode="after")
    def _span_shape(self):  # type: ignore[no-untyped-def]
        span, clause = self.span, self.clause  # type: ignore[attr-defined]
        if (span is None) != (clause is None):
            raise ValueError("span and clause go together: give both or neither")
        if span is not None and not (0 <= span[0] < span[1] and span[1] - span[0] == len(clause or "")):
            raise ValueError(f"span {list(span)} does not fit a clause of {len(clause or '')} characters")
        return self


class EvidenceLabel(_Spanned):
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


# How a distractor preference is framed: the user's own preference on a topic none of their tasks
# asks about, another person's, one the user no longer holds, or a hypothetical.
DistractorForm = Literal["own_other_topic", "other_person", "ended", "hypothetical"]


class DistractorLabel(_Spanned):
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
