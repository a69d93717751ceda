"""The build plan: ground truth decided before any text is written.

A plan says, per persona, which instances exist, what each instance's answer is (constraints),
which turns reveal it (evidence items, state mentions), and how the history's sessions lie on the
timeline. Writers (procedural or LLM) only turn session plans into text; they never change the
plan, so both writers produce the same answer key for the same seed.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from iba.construct.rng import iso_after
from iba.types import Dimension, Persona, PreferenceValue, Scenario, TransientState

SessionKind = Literal["evidence", "state", "noise"]


@dataclass(frozen=True)
class Reveal:
    """One (dimension, static value) that an evidence turn reveals."""

    dimension: str
    dimension_name: str
    value: str
    value_text: str
    cue: str
    superseded: bool = False  # the old value of a changed preference, or one a state overrides
    # every cue of the value: the writer may say it with another one when `cue`'s sentences are
    # used up in the history (see iba.construct.sentences)
    alternatives: tuple[str, ...] = ()


@dataclass(eq=False)
class EvidenceItem:
    """One labelled user turn (plus the session around it) revealing one or more values."""

    key: str
    instance_id: str
    scenario: Scenario
    topic: str  # the past task the session is about (never the instance's own topic)
    signal_type: str
    reveals: list[Reveal]
    position: int  # index of the labelled turn inside its four-turn exchange (the session adds `offset`)
    window: tuple[float, float]  # allowed place in the history, as fractions of its span
    before: "StateSpan | None" = None  # must come before this state began (a habit the state overrides)
    anchored: bool = False  # the turn must name its scenario (never planned for evidence; the writer names it at a matched rate)
    recent: bool = False  # reveals the new value of a changed preference (may be said as new: "lately ...")
    turn_id: str = ""  # set by the layout
    timestamp: str = ""


@dataclass(eq=False)
class DistractorItem:
    """A preference-shaped user turn no task of the persona depends on (see iba.construct.distractors).

    own_other_topic: an exchange like an evidence one (a past task of `scenario`, the user's reaction)
    at `position` 0 or 2; other_person: the same exchange about a task done for someone else, whose
    preference the reaction states; ended and hypothetical: one user turn and a reply, inside chat.
    """

    key: str
    form: str  # a DistractorForm
    scenario: Scenario
    reveals: list[Reveal]
    signal_type: str
    position: int
    topic: str
    person: tuple[str, str, str] | None = None  # other_person: (who, they, them)
    anchored: bool = False  # the turn must name its scenario (its dimension shares an anchored facet with a task's)
    recent: bool = False  # said as a recent change ("lately ..."), as often as evidence of new values is
    turn_id: str = ""
    timestamp: str = ""


@dataclass(eq=False)
class StateMention:
    """A user turn mentioning a transient state (evidence for state-driven constraints if active)."""

    key: str
    state: TransientState
    cue: str
    active: bool
    span: "StateSpan | None" = None
    turn_id: str = ""
    timestamp: str = ""


@dataclass(eq=False)
class StateSpan:
    """When a persona's transient state held, in days before the day of the persona's tasks.

    Active states started `start_ago` days before and last past the task time; expired ones ended
    `end_ago` days before (distractors: mentioned in the history, but over by task time).
    """

    state: TransientState
    active: bool
    start_ago: int
    end_ago: int  # <= 0 for an active state (it ends after the tasks)
    mentions: list[StateMention] = field(default_factory=list)


@dataclass(eq=False)
class Constraint:
    """The ground truth for one dimension of one instance."""

    dimension: Dimension
    expected: PreferenceValue  # the static value the answer key expects
    kind: Literal["static", "dynamic"] = "static"
    source: Literal["preference", "state"] = "preference"
    superseded: PreferenceValue | None = None  # old value (dynamic) or the long-term one a state overrides
    state: TransientState | None = None
    evidence: list[str] = field(default_factory=list)  # turn ids, set after layout


@dataclass(eq=False)
class InstancePlan:
    instance_id: str
    persona_id: str
    domain: str
    scenario: Scenario
    query: str
    topic: str
    template: str
    constraints: list[Constraint]
    evidence: list[EvidenceItem]
    states: list[StateMention]  # active mentions that are evidence for this instance
    now: datetime | None = None


@dataclass(eq=False)
class NoiseSpec:
    category: Literal["chat", "help"]
    topic: str  # a noun phrase ("a squeaky door hinge")
    topic_id: str = ""  # its entry in the topic bank (iba.construct.noise_topics), "" if none


@dataclass(eq=False)
class SessionPlan:
    key: str
    kind: SessionKind
    n_turns: int
    item: EvidenceItem | StateMention | DistractorItem | None = None
    noise: NoiseSpec | None = None
    # evidence and state sessions: their four-turn exchange starts at turn `offset`; the other
    # turns are filler chat on `noise` (so these sessions are as long as noise sessions)
    offset: int = 0
    day_window: tuple[int, int] = (0, 0)
    day: int = -1
    index: int = -1  # session number in the persona's history, set by the layout
    start: datetime | None = None
    # seconds after `start` of each turn, set by the layout (compact: the full build has ~2
    # million turns, and their timestamps as strings took ~160 MB of its plans)
    turn_offsets: array = field(default_factory=lambda: array("I"))
    # distractor exchanges placed in this session's filler: (turn offset, item), offsets even, in order
    distractors: list[tuple[int, DistractorItem]] = field(default_factory=list)

    @property
    def labelled(self) -> int | None:
        """The index of this session's labelled (relevant) turn, if any."""
        if self.kind == "evidence":
            return self.offset + self.item.position  # type: ignore[union-attr]
        if self.kind == "state" and self.item.active:  # type: ignore[union-attr]
            return self.offset
        return None

    @property
    def turn_times(self) -> list[str]:
        """Each turn's timestamp (ISO 8601)."""
        return iso_after(self.start, self.turn_offsets)  # type: ignore[arg-type]

    def turn_time(self, k: int) -> str:
        return iso_after(self.start, self.turn_offsets[k : k + 1])[0]  # type: ignore[arg-type]

    def distractor_turns(self) -> list[tuple[int, "DistractorItem"]]:
        """(turn index in the session, item) of each distractor turn the session holds."""
        return [(offset + d.position, d) for offset, d in self.distractors]


@dataclass(eq=False)
class PersonaPlan:
    persona: Persona
    instances: list[InstancePlan]
    spans: list[StateSpan]
    sessions: list[SessionPlan]
    start: datetime
    span_days: int

    @property
    def n_turns(self) -> int:
        return sum(s.n_turns for s in self.sessions)

    @property
    def n_relevant(self) -> int:
        return sum(s.labelled is not None for s in self.sessions)
