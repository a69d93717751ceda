"""The checks the pydantic models cannot make on their own, on already-validated objects:
request templates, unique ids, dynamic values that reference static values of their dimension,
API slots and value->parameter mappings, verifier ids and parameters, state constraints.

Each check returns its problems as `<key path>: <message>` lines (empty when there are none);
the loader prefixes the file and raises them together as one `TaxonomyError`.
"""

from __future__ import annotations

import string
from typing import Any

from iba.taxonomy.verifier_params import VERIFIER_IDS, VERIFIER_PARAMS
from iba.types import Dimension, Scenario, TransientState


def duplicates(ids: list[str]) -> set[str]:
    """The ids that occur more than once."""
    seen: set[str] = set()
    return {i for i in ids if i in seen or seen.add(i)}  # type: ignore[func-returns-value]


def _is_type(v: Any, typ: str) -> bool:
    if typ == "boolean":
        return isinstance(v, bool)
    if isinstance(v, bool):
        return False
    return {"string": isinstance(v, str), "integer": isinstance(v, int), "number": isinstance(v, int | float)}[typ]


def check_scenario(s: Scenario, at: str) -> list[str]:
    p: list[str] = []
    # request templates: only {topic}, and topics when it is used
    for j, t in enumerate(s.tasks):
        try:
            fields = {f for _, f, _, _ in string.Formatter().parse(t) if f is not None}
        except ValueError as e:
            p.append(f"{at}.tasks[{j}]: bad template ({e}); write a literal brace as {{{{ or }}}}")
            continue
        if fields - {"topic"}:
            p.append(f"{at}.tasks[{j}]: unknown placeholder(s) {sorted(fields - {'topic'})}; only {{topic}} is filled")
        if "topic" in fields and not s.topics:
            p.append(f"{at}.topics: tasks use {{topic}} but the scenario has no topics")
    if not s.tasks:
        p.append(f"{at}.tasks: a scenario needs at least one request template")
    if not s.dimensions:
        p.append(f"{at}.dimensions: a scenario needs at least one dimension")
    for d in sorted(duplicates([d.id for d in s.dimensions])):
        p.append(f"{at}.dimensions: duplicate dimension id {d!r}")
    params = {prm.name: prm for prm in (s.api.params if s.api else [])}
    dims = {d.id: d for d in s.dimensions}
    if s.api:
        for name in sorted(duplicates([prm.name for prm in s.api.params])):
            p.append(f"{at}.api.params: duplicate parameter name {name!r}")
        for k, prm in enumerate(s.api.params):
            where = f"{at}.api.params[{k}]"
            if prm.slot and prm.dimension is None:
                p.append(f"{where}.dimension: slot parameter {prm.name!r} must name the dimension that drives it")
            if prm.dimension is not None and prm.dimension not in dims:
                p.append(f"{where}.dimension: unknown dimension {prm.dimension!r} (scenario has: {', '.join(dims)})")
            for e in prm.enum or []:
                if not _is_type(e, prm.type):
                    p.append(f"{where}.enum: {e!r} is not of type {prm.type}")
    has_dynamic = False
    for j, d in enumerate(s.dimensions):
        p.extend(_check_dimension(s, d, f"{at}.dimensions[{j}]", params))
        has_dynamic = has_dynamic or d.dynamic
    if s.dynamic != has_dynamic:
        p.append(
            f"{at}.dynamic: is {str(s.dynamic).lower()} but the scenario "
            + ("has no dynamic value (add a 'preferred X; now Y' value with from_value/to_value)" if s.dynamic else "has dynamic values (set dynamic: true or remove them)")
        )
    return p


def _check_dimension(s: Scenario, d: Dimension, at: str, params: dict[str, Any]) -> list[str]:
    p: list[str] = []
    for v in sorted(duplicates([v.id for v in d.values])):
        p.append(f"{at}.values: duplicate value id {v!r}")
    static = [v.id for v in d.values if not v.dynamic]
    if len(static) < 2:
        p.append(f"{at}.values: dimension {d.id!r} needs at least 2 static (mutually exclusive) values, has {len(static)}")
    slot_params = [name for name, prm in params.items() if prm.slot and prm.dimension == d.id]
    for k, v in enumerate(d.values):
        where = f"{at}.values[{k}]"
        if v.dynamic:
            for field in ("from_value", "to_value"):
                ref = getattr(v, field)
                if ref not in static:
                    p.append(f"{where}.{field}: {ref!r} is not a static value of dimension {d.id!r} (static values: {', '.join(static)})")
            if v.from_value == v.to_value:
                p.append(f"{where}.to_value: a dynamic value must change to a different value than from_value")
        elif v.cue is not None and not v.cue.strip():
            p.append(f"{where}.cue: empty cue")
        if v.verifier is not None:
            p.extend(_check_verifier(v.verifier.id, v.verifier.params, f"{where}.verifier"))
        if v.api and s.api is None:
            p.append(f"{where}.api: only call_api scenarios map values to API parameters")
            continue
        for name, accepted in v.api.items():
            prm = params.get(name)
            if prm is None:
                p.append(f"{where}.api.{name}: unknown API parameter {name!r} (parameters: {', '.join(params)})")
                continue
            if not prm.slot or prm.dimension != d.id:
                p.append(f"{where}.api.{name}: parameter {name!r} is not a slot driven by dimension {d.id!r}; set slot: true, dimension: {d.id} on it")
            if not accepted:
                p.append(f"{where}.api.{name}: list at least one accepted value")
            for a in accepted:
                if not _is_type(a, prm.type):
                    p.append(f"{where}.api.{name}: {a!r} is not of type {prm.type}")
                elif prm.enum is not None and a not in prm.enum:
                    p.append(f"{where}.api.{name}: {a!r} is not in the enum of {name!r} ({', '.join(map(str, prm.enum))})")
                elif (prm.minimum is not None and a < prm.minimum) or (prm.maximum is not None and a > prm.maximum):
                    p.append(f"{where}.api.{name}: {a!r} is outside [{prm.minimum}, {prm.maximum}]")
        if not v.dynamic:
            for name in slot_params:
                if name not in v.api:
                    p.append(f"{where}.api: value {v.id!r} must give the accepted values of slot {name!r}")
    return p


def _check_verifier(vid: str, params: dict[str, Any], at: str) -> list[str]:
    if vid not in VERIFIER_PARAMS:
        return [f"{at}.id: unknown verifier {vid!r} (known: {', '.join(VERIFIER_IDS)})"]
    spec = VERIFIER_PARAMS[vid]
    p = []
    for name in sorted(set(params) - set(spec)):
        p.append(f"{at}.params.{name}: verifier {vid!r} takes no parameter {name!r} (takes: {', '.join(spec) or 'none'})")
    for name, typ in spec.items():
        if name not in params:
            p.append(f"{at}.params.{name}: verifier {vid!r} needs parameter {name!r}")
        elif typ is int and (not isinstance(params[name], int) or isinstance(params[name], bool) or params[name] < 0):
            p.append(f"{at}.params.{name}: expected a non-negative integer, got {params[name]!r}")
        elif typ is list and (not isinstance(params[name], list) or not params[name] or not all(isinstance(t, str) and t.strip() for t in params[name])):
            p.append(f"{at}.params.{name}: expected a non-empty list of non-empty strings, got {params[name]!r}")
    if not p and vid == "word_count_range" and params["min"] > params["max"]:
        p.append(f"{at}.params: min {params['min']} is greater than max {params['max']}")
    if not p and vid == "item_count" and params["n"] < 1:
        p.append(f"{at}.params.n: must be at least 1")
    return p


def check_state(st: TransientState, at: str, scenarios: dict[str, Scenario]) -> list[str]:
    """Problems of one state (`at` is its key path): it needs cues and constraints, and each
    constraint must name a static value of a dimension of a known scenario."""
    p: list[str] = []
    if not st.cues:
        p.append(f"{at}.cues: a state needs at least one cue")
    if not st.constrains:
        p.append(f"{at}.constrains: a state needs at least one constraint")
    for k, c in enumerate(st.constrains):
        where = f"{at}.constrains[{k}]"
        s = scenarios.get(c.scenario)
        if s is None:
            p.append(f"{where}.scenario: unknown scenario {c.scenario!r}")
            continue
        dims = {d.id: d for d in s.dimensions}
        d = dims.get(c.dimension)
        if d is None:
            p.append(f"{where}.dimension: scenario {c.scenario!r} has no dimension {c.dimension!r} (has: {', '.join(dims)})")
            continue
        static = [v.id for v in d.values if not v.dynamic]
        if c.value not in static:
            p.append(f"{where}.value: {c.value!r} is not a static value of {c.scenario}.{c.dimension} (values: {', '.join(static)})")
    return p
