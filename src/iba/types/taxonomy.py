"""The taxonomy's contracts: domains, scenarios, dimensions and their values, API templates, states."""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from iba.types.common import ActionType, ParamType, Strict


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
