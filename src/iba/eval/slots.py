"""CallAPI(params) scoring: one binary verdict per personalization slot (paper Appendix A.2).

A slot scores 1 when the submitted value of its parameter satisfies one of the slot's accepted
values, else 0. Task-fixed parameters (`AnswerKey.fixed_params`, `ApiParam.slot=False`) are never
scored. The instance score is the mean over the slots.

Matching, after normalisation (`normalize`): case, surrounding and repeated whitespace,
underscores and hyphens (all become one space) are ignored; a synonym declared in the
ApiTemplate (`synonyms: {"mild": ["low spice", ...]}`) counts as its canonical value; numbers and
numeric strings compare by value ("3" == 3 == 3.0); booleans match "true"/"yes"/"false"/"no".

Ranges: an accepted value that is a *string* of one of these forms is a numeric range, inclusive
where the operator says so, and the submitted value must be a number or numeric string:

    ">=3"  "<=3"  ">3"  "<3"   one-sided bounds
    "2..5"                     both ends, inclusive (2 <= x <= 5)

(The Slot contract holds scalars only, so ranges are strings rather than {"min":..,"max":..}.)

Validity: with an ApiTemplate the action is first checked against the API schema: a generate
action, another API name, a missing required parameter, an extra parameter, a wrong JSON type
(no coercion: "3" for an integer parameter is invalid), a value outside the enum (compared after
normalisation and synonym mapping, so "Low-Spice" for enum "mild" is valid) or outside
minimum/maximum makes the action invalid: every slot scores 0, the ScoreRecord is flagged
`invalid_action=True` and each verdict's rationale starts with the reason. Without a template
(imported datasets) there is no schema check, only matching.
"""

from __future__ import annotations

import math
import re
from typing import Any

from iba.types import Action, AnswerKey, ApiParam, ApiTemplate, ScoreRecord, Slot, Verdict

SCORER = "slots"
JUDGE = "slot-match"

_SEP = re.compile(r"[\s_\-]+")
_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")
_BOUND = re.compile(r"^\s*(>=|<=|>|<)\s*(" + _NUMBER.pattern + r")\s*$")
_BETWEEN = re.compile(r"^\s*(" + _NUMBER.pattern + r")\s*\.\.\s*(" + _NUMBER.pattern + r")\s*$")
_TRUE, _FALSE = {"true", "yes", "y"}, {"false", "no", "n"}


# --------------------------------------------------------------------------- normalisation


def normalize(value: Any) -> Any:
    """Canonical comparable form: lower-case text with separators collapsed; numbers as float."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        raw = value.strip()
        if _NUMBER.fullmatch(raw):  # before separators are collapsed, which would eat a minus sign
            return float(raw)
        return _SEP.sub(" ", raw.lower()).strip()
    return value


def synonym_map(template: ApiTemplate | None) -> dict[str, str]:
    """normalised synonym (and canonical) -> normalised canonical value."""
    out: dict[str, str] = {}
    for canonical, syns in (template.synonyms if template else {}).items():
        canon = normalize(canonical)
        if not isinstance(canon, str):
            continue
        out[canon] = canon
        for s in syns:
            ns = normalize(s)
            if isinstance(ns, str):
                out[ns] = canon
    return out


def canonical(value: Any, synonyms: dict[str, str]) -> Any:
    v = normalize(value)
    return synonyms.get(v, v) if isinstance(v, str) else v


def _as_number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str) and _NUMBER.fullmatch(value.strip()):
        return float(value.strip())
    return None


def _range_check(spec: str, number: float) -> bool | None:
    """True/False if `spec` is a range string, None if it is not one."""
    m = _BOUND.match(spec)
    if m:
        op, bound = m.group(1), float(m.group(2))
        return {">=": number >= bound, "<=": number <= bound, ">": number > bound, "<": number < bound}[op]
    m = _BETWEEN.match(spec)
    if m:
        lo, hi = float(m.group(1)), float(m.group(5))
        return lo <= number <= hi
    return None


def is_range(spec: Any) -> bool:
    return isinstance(spec, str) and bool(_BOUND.match(spec) or _BETWEEN.match(spec))


def value_matches(value: Any, accepted: list[Any], synonyms: dict[str, str] | None = None) -> bool:
    """Does the submitted `value` satisfy any of the `accepted` values (see the module docstring)?"""
    syn = synonyms or {}
    if value is None or isinstance(value, (list, dict)):
        return False
    number = _as_number(value)
    got = canonical(value, syn)
    for acc in accepted:
        if is_range(acc):
            if number is not None and _range_check(acc, number):
                return True
            continue
        if isinstance(acc, bool) or isinstance(got, bool):
            if _as_bool(acc) is not None and _as_bool(acc) == _as_bool(value):
                return True
            continue
        if got == canonical(acc, syn):
            return True
    return False


def _as_bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        v = value.strip().lower()
        if v in _TRUE:
            return True
        if v in _FALSE:
            return False
    return None


# --------------------------------------------------------------------------- validity


def _type_ok(param: ApiParam, value: Any) -> bool:
    if param.type == "string":
        return isinstance(value, str)
    if param.type == "boolean":
        return isinstance(value, bool)
    if param.type == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer()
        )
    if param.type == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return False


def validate_action(action: Action, template: ApiTemplate) -> str | None:
    """The first reason the action is not a valid call of `template`, or None if it is valid."""
    if action.kind != "call_api":
        return f"a {action.kind} action on a call_api task (expected a call of {template.name})"
    if action.api_name and action.api_name != template.name:
        return f"called {action.api_name!r}, expected {template.name!r}"
    params = {k: v for k, v in (action.params or {}).items() if v is not None}
    declared = {p.name: p for p in template.params}
    extra = sorted(set(params) - set(declared))
    if extra:
        return f"unknown parameter(s) {', '.join(extra)}"
    syn = synonym_map(template)
    for p in template.params:
        if p.name not in params:
            if p.required:
                return f"missing required parameter {p.name!r}"
            continue
        value = params[p.name]
        if not _type_ok(p, value):
            return f"parameter {p.name!r} should be {p.type}, got {type(value).__name__} {value!r}"
        if p.enum is not None:
            allowed = {canonical(e, syn) for e in p.enum}
            if canonical(value, syn) not in allowed:
                return f"parameter {p.name!r}={value!r} is not one of {list(p.enum)}"
        numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
        if numeric and p.minimum is not None and value < p.minimum:
            return f"parameter {p.name!r}={value!r} is below the minimum {p.minimum:g}"
        if numeric and p.maximum is not None and value > p.maximum:
            return f"parameter {p.name!r}={value!r} is above the maximum {p.maximum:g}"
    return None


# --------------------------------------------------------------------------- scoring


def slot_verdict(slot: Slot, params: dict[str, Any], synonyms: dict[str, str]) -> Verdict:
    if slot.param not in params or params[slot.param] is None:
        return Verdict(target=slot.id, kind="slot", judge=JUDGE, passed=False,
                       rationale=f"{slot.param} not set; accepted {slot.accepted}")
    value = params[slot.param]
    ok = value_matches(value, slot.accepted, synonyms)
    word = "satisfies" if ok else "does not satisfy"
    return Verdict(target=slot.id, kind="slot", judge=JUDGE, passed=ok,
                   rationale=f"{slot.param}={value!r} {word} accepted {slot.accepted}")


def score_slots(
    action: Action, key: AnswerKey, template: ApiTemplate | None = None, *, run_key: str = ""
) -> ScoreRecord:
    """Score a call_api action against the key's slots; invalid actions score every slot 0."""
    reason = validate_action(action, template) if template is not None else (
        None if action.kind == "call_api" else f"a {action.kind} action on a call_api task"
    )
    if reason is not None:
        verdicts = [
            Verdict(target=s.id, kind="slot", judge=JUDGE, passed=False, rationale=f"invalid action: {reason}")
            for s in key.slots
        ]
    else:
        syn = synonym_map(template)
        verdicts = [slot_verdict(s, action.params or {}, syn) for s in key.slots]
    return ScoreRecord(
        run_key=run_key, scorer=SCORER, repeat=0, verdicts=verdicts,
        score=mean_passed(verdicts) if key.slots else (0.0 if reason else None), invalid_action=reason is not None,
        failure="invalid_action" if reason is not None else None,
    )


def mean_passed(verdicts: list[Verdict]) -> float | None:
    """Mean over scored verdicts (passed is not None); None when none could be scored."""
    scored = [v.passed for v in verdicts if v.passed is not None]
    return sum(scored) / len(scored) if scored else None


def choices(prop: dict[str, Any]) -> list[Any] | None:
    """The finite set of values a JSON-schema parameter allows (enum, boolean, integer range of at
    most 100), or None. (agents.alignment_tools.choice_params asks the model about enums and booleans
    only, on purpose: an integer range is a count the request states, not a preference to infer.)"""
    if prop.get("enum"):
        return list(prop["enum"])
    if prop.get("type") == "boolean":
        return [True, False]
    lo, hi = prop.get("minimum"), prop.get("maximum")
    if prop.get("type") == "integer" and lo is not None and hi is not None and 0 <= hi - lo <= 100:
        return list(range(math.ceil(lo), math.floor(hi) + 1))
    return None


def chance_score(key: AnswerKey, api_schema: dict[str, Any] | None, template: ApiTemplate | None = None) -> float | None:
    """The expected slot accuracy of a uniform random valid choice per slot: for each slot whose
    parameter has a finite set of values, the share of them that satisfy it; their mean (None when
    no slot has one). The floor a CallAPI score must clear before it says the agent used anything."""
    props = (api_schema or {}).get("properties") or {}
    syn = synonym_map(template)
    shares = []
    for slot in key.slots:
        values = choices(props.get(slot.param) or {})
        if values:
            shares.append(sum(value_matches(v, slot.accepted, syn) for v in values) / len(values))
    return sum(shares) / len(shares) if shares else None

