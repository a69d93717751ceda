"""The IBA-Bench taxonomy: domains -> scenarios -> preference dimensions -> values (package data).

`load_taxonomy()` reads `data/<domain>.yaml` (one `Domain` each, see iba.types) and the optional
`data/states.yaml` (transient states), checks everything the pydantic models cannot check on their
own (unique ids, dynamic values that reference static values of their dimension, API slots and
value->parameter mappings, verifier ids and parameters, state constraints) and returns a
`Taxonomy` whose `version` carries a short content hash.

Every problem is raised as a `TaxonomyError` that names the file and the offending key path,
e.g. `writing.yaml: scenarios[3].dimensions[1].values[0].cue: Field required`.

`taxonomy_totals()` counts the taxonomy; `validate_totals()` checks it against the paper's
Table 13 (`PAPER_TABLE13`, `PAPER_DOMAINS`, `PAPER_TOTALS`).
"""

from __future__ import annotations

import functools
import string
from collections.abc import Iterable
from importlib.resources import as_file, files
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from iba.types import Dimension, Domain, Scenario, Taxonomy, TransientState, stable_hash

__all__ = [
    "DOMAIN_ORDER",
    "PAPER_DOMAINS",
    "PAPER_SCENARIOS",
    "PAPER_TABLE13",
    "PAPER_TOTALS",
    "TAXONOMY_FORMAT",
    "TaxonomyError",
    "VERIFIER_IDS",
    "VERIFIER_PARAMS",
    "default_data_dir",
    "lint_taxonomy",
    "load_taxonomy",
    "table13_problems",
    "taxonomy_totals",
    "validate_totals",
]

TAXONOMY_FORMAT = "iba-taxonomy/1"
STATES_FILE = "states.yaml"

# The deterministic checks of iba.eval.verifiers: id -> {parameter: type}. All parameters are required.
VERIFIER_PARAMS: dict[str, dict[str, type]] = {
    "word_count_range": {"min": int, "max": int},
    "word_count_max": {"max": int},
    "word_count_min": {"min": int},
    "numbered_list": {},
    "unnumbered_bullets": {},
    "no_bullets": {},
    "item_count": {"n": int},  # exactly n list items
    "first_person": {},
    "third_person": {},
    "has_code_block": {},
    "no_code_block": {},
    "has_table": {},
    "no_table": {},
    "has_headings": {},
    "no_headings": {},
    "contains_any": {"terms": list},
    "contains_none": {"terms": list},
    "has_citations": {},
}
VERIFIER_IDS: tuple[str, ...] = tuple(VERIFIER_PARAMS)

# --------------------------------------------------------------------------- the paper's Table 13

# domain id -> (name, short column name in the paper's tables); also the fixed domain order
PAPER_DOMAINS: dict[str, tuple[str, str]] = {
    "writing": ("Writing and Design", "Writing"),
    "work": ("Work", "Work"),
    "daily": ("Daily Consumption", "Daily"),
    "planning": ("Planning", "Plan."),
    "health": ("Exercise and Health", "Health"),
    "transportation": ("Transportation", "Trans."),
    "medical": ("Medical Services", "Med."),
    "leisure": ("Leisure Activities", "Leis."),
    "information": ("Information Management", "Info."),
}
DOMAIN_ORDER: tuple[str, ...] = tuple(PAPER_DOMAINS)

G, C = "generate", "call_api"
# domain id -> [(scenario id, D, P, I, dynamic, action)] in table order
_TABLE13_ROWS: dict[str, list[tuple[str, int, int, int, bool, str]]] = {
    "writing": [
        ("peer_review_report", 4, 9, 54, True, G),
        ("academic_paper", 6, 15, 71, True, G),
        ("research_proposal", 4, 13, 76, True, G),
        ("business_plan", 3, 8, 29, True, G),
        ("diary", 3, 7, 23, True, G),
        ("technical_documentation", 4, 12, 80, True, G),
        ("blog_post", 2, 4, 4, False, G),
        ("wechat_article", 3, 8, 27, True, G),
        ("novel", 2, 4, 6, False, G),
        ("resume", 5, 14, 72, True, G),
        ("short_video_script", 3, 11, 41, False, G),
        ("ppt_slides", 2, 9, 15, True, G),
        ("mind_map", 4, 20, 79, True, G),
        ("modular_course", 4, 14, 71, True, G),
        ("instruction_manual", 3, 15, 73, True, G),
        ("self_introduction", 3, 8, 29, False, G),
    ],
    "work": [
        ("scholarship_application", 7, 17, 140, True, G),
        ("performance_report_spreadsheet", 6, 23, 90, True, G),
        ("schedule_planning", 6, 31, 119, True, G),
        ("data_analysis", 4, 27, 101, True, G),
        ("programming", 5, 23, 90, True, G),
        ("leave_application", 4, 10, 93, False, G),
        ("project_management", 5, 22, 105, True, G),
        ("communication_management", 2, 5, 7, False, G),
        ("announcement_drafting", 3, 12, 74, True, G),
        ("event_organization", 4, 14, 111, False, G),
        ("work_summary", 4, 16, 113, True, G),
        ("terminology_explanation", 3, 14, 112, True, G),
    ],
    "daily": [
        ("food_ordering", 3, 15, 122, True, C),
        ("ticket_booking", 4, 17, 145, True, C),
        ("clothing_purchase", 4, 15, 153, True, C),
        ("digital_product_purchase", 4, 10, 89, False, C),
        ("accommodation_booking", 4, 12, 138, False, C),
        ("online_course_purchase", 5, 12, 154, False, C),
        ("book_purchase", 4, 12, 127, True, C),
        ("house_renting", 11, 28, 158, False, C),
    ],
    "planning": [
        ("weekly_plan", 4, 19, 122, True, G),
        ("monthly_plan", 4, 12, 107, True, G),
        ("long_term_goals", 3, 16, 130, True, G),
        ("project_plan", 4, 15, 114, False, G),
        ("financial_plan", 3, 13, 74, True, G),
        ("travel_plan", 5, 18, 123, True, G),
        ("study_plan", 4, 19, 154, True, G),
        ("career_development_plan", 4, 16, 100, True, G),
        ("habit_building_plan", 4, 18, 115, False, G),
        ("skill_improvement_plan", 4, 16, 112, True, G),
    ],
    "health": [
        ("exercise_plan", 5, 22, 260, True, G),
        ("diet_plan", 4, 21, 255, True, G),
        ("sleep_plan", 6, 32, 262, True, G),
        ("mental_health_support", 1, 6, 4, False, G),
    ],
    "transportation": [
        ("commute_route_planning", 5, 21, 236, False, C),
        ("ride_hailing", 2, 6, 8, False, C),
        ("sightseeing_route_planning", 4, 19, 215, False, C),
        ("parking", 3, 10, 59, False, C),
    ],
    "medical": [
        ("appointment_registration", 4, 15, 210, False, C),
        ("medicine_selection", 4, 17, 231, False, C),
        ("online_medical_consultation", 3, 14, 83, False, G),
    ],
    "leisure": [
        ("audio_visual_entertainment", 4, 24, 229, True, C),
        ("outdoor_leisure", 2, 5, 6, False, C),
        ("social_assistance", 3, 14, 98, True, G),
    ],
    "information": [
        ("research_report_writing", 4, 18, 174, True, G),
        ("timeline_organization", 3, 10, 41, True, G),
        ("meeting_minutes_organization", 3, 13, 60, True, G),
        ("reading_notes", 2, 9, 16, True, G),
        ("folder_organization", 5, 19, 191, False, G),
        ("tool_usage", 9, 34, 182, True, G),
    ],
}
# scenario id -> (D, P, I, dynamic, action)
PAPER_TABLE13: dict[str, tuple[int, int, int, bool, str]] = {
    row[0]: row[1:] for rows in _TABLE13_ROWS.values() for row in rows  # type: ignore[misc]
}
# scenario ids of each domain, in table order
PAPER_SCENARIOS: dict[str, list[str]] = {d: [r[0] for r in rows] for d, rows in _TABLE13_ROWS.items()}
PAPER_TOTALS: dict[str, int] = {
    "domains": 9,
    "scenarios": 66,
    "dimensions": 262,
    "values": 997,
    "call_api_scenarios": 16,
    "generate_scenarios": 50,
    "dynamic_scenarios": 43,
    "instances": 6962,
}


class TaxonomyError(ValueError):
    """Malformed taxonomy data. The message names the file and the key path of every problem."""

    def __init__(self, problems: str | list[str]) -> None:
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        shown = self.problems[:40]
        more = len(self.problems) - len(shown)
        super().__init__("\n".join(shown) + (f"\n... and {more} more problems" if more > 0 else ""))


# --------------------------------------------------------------------------- loading


def default_data_dir() -> Path:
    with as_file(files(__package__) / "data") as p:
        return Path(p)


def load_taxonomy(data_dir: str | Path | None = None) -> Taxonomy:
    """Load and check the taxonomy in `data_dir` (default: the shipped data, loaded once and cached).

    The returned object is shared when cached: treat it as read-only.
    """
    if data_dir is None:
        return _load_default()
    return _load_dir(Path(data_dir))


@functools.cache
def _load_default() -> Taxonomy:
    return _load_dir(default_data_dir())


def _order_key(path: Path) -> tuple[int, str]:
    stem = path.stem
    return (DOMAIN_ORDER.index(stem) if stem in DOMAIN_ORDER else len(DOMAIN_ORDER), stem)


def _load_dir(data_dir: Path) -> Taxonomy:
    if not data_dir.is_dir():
        raise TaxonomyError(f"{data_dir}: not a directory of taxonomy files (<domain>.yaml, states.yaml)")
    domain_files = sorted((p for p in data_dir.glob("*.yaml") if p.name != STATES_FILE), key=_order_key)
    if not domain_files:
        raise TaxonomyError(f"{data_dir}: no domain files (*.yaml); expected e.g. writing.yaml")
    problems: list[str] = []
    domains: list[Domain] = []
    seen_scenarios: dict[str, Path] = {}
    for path in domain_files:
        try:
            domain = _load_domain(path)
        except TaxonomyError as e:
            problems.extend(e.problems)
            continue
        for i, s in enumerate(domain.scenarios):
            if s.id in seen_scenarios:
                problems.append(
                    f"{path}: scenarios[{i}].id: duplicate scenario id {s.id!r} (also in {seen_scenarios[s.id]})"
                )
            seen_scenarios.setdefault(s.id, path)
        domains.append(domain)
    states: list[TransientState] = []
    states_path = data_dir / STATES_FILE
    if states_path.exists() and not problems:
        try:
            states = _load_states(states_path, {s.id: s for d in domains for s in d.scenarios})
        except TaxonomyError as e:
            problems.extend(e.problems)
    if problems:
        raise TaxonomyError(problems)
    content = {"domains": [d.model_dump(mode="json") for d in domains], "states": [s.model_dump(mode="json") for s in states]}
    return Taxonomy(version=f"{TAXONOMY_FORMAT}+{stable_hash(content, 12)}", domains=domains, states=states)


class _UniqueKeyLoader(yaml.SafeLoader):
    """A safe loader that refuses duplicate mapping keys (PyYAML silently keeps the last one)."""


def _construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping", node.start_mark, f"found duplicate key {key!r}", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _read_yaml(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise TaxonomyError(f"{path}: cannot read: {e}") from None
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e)
        context = getattr(e, "context", None)
        raise TaxonomyError(f"{path}: YAML syntax error at {where}{problem}" + (f" ({context})" if context else "")) from None


def _loc(loc: Iterable[Any]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _validation_problems(path: Path, err: ValidationError, prefix: str = "") -> list[str]:
    problems = []
    for e in err.errors():
        loc = _loc(e["loc"])
        if prefix:
            loc = prefix + ("" if loc.startswith("[") else ".") + loc if loc != "(top level)" else prefix
        msg = e["msg"].removeprefix("Value error, ")
        problems.append(f"{path}: {loc}: {msg}")
    return problems


def _load_domain(path: Path) -> Domain:
    data = _read_yaml(path)
    if not isinstance(data, dict):
        raise TaxonomyError(f"{path}: (top level): expected a mapping with id, name, short, scenarios; got {type(data).__name__}")
    if data.get("id") != path.stem:
        raise TaxonomyError(f"{path}: id: domain id {data.get('id')!r} must equal the file name {path.stem!r}")
    problems: list[str] = []
    scenarios = data.get("scenarios")
    if isinstance(scenarios, list):
        for i, s in enumerate(scenarios):
            if isinstance(s, dict):
                if "domain" not in s:
                    s["domain"] = path.stem
                elif s["domain"] != path.stem:
                    problems.append(f"{path}: scenarios[{i}].domain: {s['domain']!r} differs from the file's domain {path.stem!r}; leave it out")
    try:
        domain = Domain.model_validate(data)
    except ValidationError as e:
        raise TaxonomyError(problems + _validation_problems(path, e)) from None
    for i, s in enumerate(domain.scenarios):
        problems.extend(f"{path}: {p}" for p in _check_scenario(s, f"scenarios[{i}]"))
    if problems:
        raise TaxonomyError(problems)
    return domain


def _duplicates(ids: list[str]) -> set[str]:
    seen: set[str] = set()
    return {i for i in ids if i in seen or seen.add(i)}  # type: ignore[func-returns-value]


def _is_type(v: Any, typ: str) -> bool:
    if typ == "boolean":
        return isinstance(v, bool)
    if isinstance(v, bool):
        return False
    return {"string": isinstance(v, str), "integer": isinstance(v, int), "number": isinstance(v, int | float)}[typ]


def _check_scenario(s: Scenario, at: str) -> list[str]:
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
    for d in sorted(_duplicates([d.id for d in s.dimensions])):
        p.append(f"{at}.dimensions: duplicate dimension id {d!r}")
    params = {prm.name: prm for prm in (s.api.params if s.api else [])}
    dims = {d.id: d for d in s.dimensions}
    if s.api:
        for name in sorted(_duplicates([prm.name for prm in s.api.params])):
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
    for v in sorted(_duplicates([v.id for v in d.values])):
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


def _load_states(path: Path, scenarios: dict[str, Scenario]) -> list[TransientState]:
    data = _read_yaml(path)
    if isinstance(data, dict) and set(data) == {"states"}:
        data = data["states"]
    if data is None:
        return []
    if not isinstance(data, list):
        raise TaxonomyError(f"{path}: (top level): expected a list of states (or a mapping with one key 'states')")
    problems: list[str] = []
    states: list[TransientState] = []
    for i, item in enumerate(data):
        try:
            states.append(TransientState.model_validate(item))
        except ValidationError as e:
            problems.extend(_validation_problems(path, e, f"states[{i}]"))
            continue
        st = states[-1]
        if not st.cues:
            problems.append(f"{path}: states[{i}].cues: a state needs at least one cue")
        if not st.constrains:
            problems.append(f"{path}: states[{i}].constrains: a state needs at least one constraint")
        for k, c in enumerate(st.constrains):
            at = f"{path}: states[{i}].constrains[{k}]"
            s = scenarios.get(c.scenario)
            if s is None:
                problems.append(f"{at}.scenario: unknown scenario {c.scenario!r}")
                continue
            dims = {d.id: d for d in s.dimensions}
            d = dims.get(c.dimension)
            if d is None:
                problems.append(f"{at}.dimension: scenario {c.scenario!r} has no dimension {c.dimension!r} (has: {', '.join(dims)})")
                continue
            static = [v.id for v in d.values if not v.dynamic]
            if c.value not in static:
                problems.append(f"{at}.value: {c.value!r} is not a static value of {c.scenario}.{c.dimension} (values: {', '.join(static)})")
    for sid in sorted(_duplicates([s.id for s in states])):
        problems.append(f"{path}: states: duplicate state id {sid!r}")
    if problems:
        raise TaxonomyError(problems)
    return states


# --------------------------------------------------------------------------- counting and checks


def _scenario_counts(s: Scenario) -> tuple[int, int]:
    return len(s.dimensions), sum(len(d.values) for d in s.dimensions)


def taxonomy_totals(tax: Taxonomy) -> dict[str, int]:
    """Counts of the taxonomy (the keys of PAPER_TOTALS plus value kinds, verifiable values, states)."""
    scen = tax.scenarios()
    values = [v for s in scen for d in s.dimensions for v in d.values]
    return {
        "domains": len(tax.domains),
        "scenarios": len(scen),
        "dimensions": sum(len(s.dimensions) for s in scen),
        "values": len(values),
        "static_values": sum(not v.dynamic for v in values),
        "dynamic_values": sum(v.dynamic for v in values),
        "call_api_scenarios": sum(s.action == "call_api" for s in scen),
        "generate_scenarios": sum(s.action == "generate" for s in scen),
        "dynamic_scenarios": sum(s.dynamic for s in scen),
        "verifiable_values": sum(v.verifier is not None for v in values),
        "instances": sum(s.paper_instances for s in scen),
        "states": len(tax.states),
    }


def table13_problems(tax: Taxonomy, partial: bool = False) -> list[str]:
    """Differences between the taxonomy and Table 13 (empty when it matches).

    With `partial=True` only the domains present are checked (each must still be complete), and
    the overall totals are not.
    """
    p: list[str] = []
    present = [d.id for d in tax.domains]
    if not partial:
        missing = [d for d in DOMAIN_ORDER if d not in present]
        if missing:
            p.append(f"missing domains: {', '.join(missing)} (add data/<domain>.yaml)")
    for d in tax.domains:
        if d.id not in PAPER_DOMAINS:
            p.append(f"{d.id}: not a domain of Table 13 ({', '.join(DOMAIN_ORDER)})")
            continue
        name, short = PAPER_DOMAINS[d.id]
        if (d.name, d.short) != (name, short):
            p.append(f"{d.id}: name/short are {d.name!r}/{d.short!r}, Table 13 has {name!r}/{short!r}")
        ids = [s.id for s in d.scenarios]
        if ids != PAPER_SCENARIOS[d.id]:
            p.append(f"{d.id}: scenarios are {ids}, Table 13 has (in order) {PAPER_SCENARIOS[d.id]}")
        for s in d.scenarios:
            if s.id not in PAPER_TABLE13:
                continue
            want_d, want_p, want_i, want_dyn, want_action = PAPER_TABLE13[s.id]
            got = (*_scenario_counts(s), s.paper_instances, s.dynamic, s.action)
            want = (want_d, want_p, want_i, want_dyn, want_action)
            if got != want:
                p.append(f"{d.id}/{s.id}: (D, P, I, dyn, action) = {got}, Table 13 has {want}")
    if not partial:
        totals = taxonomy_totals(tax)
        for key, want in PAPER_TOTALS.items():
            if totals[key] != want:
                p.append(f"total {key} = {totals[key]}, the paper has {want}")
    return p


def validate_totals(tax: Taxonomy) -> None:
    """Raise TaxonomyError unless the taxonomy matches Table 13 scenario by scenario and in total."""
    problems = table13_problems(tax)
    if problems:
        raise TaxonomyError(["the taxonomy does not match the paper's Table 13:", *problems])


def lint_taxonomy(tax: Taxonomy) -> list[str]:
    """Quality problems of cues: a cue must not give its value away by name.

    A cue may not contain its dimension's name or its value's text, and the static values of a
    scenario need distinct cues.
    """
    p: list[str] = []
    for s in tax.scenarios():
        seen: dict[str, str] = {}
        for d in s.dimensions:
            for v in d.values:
                if v.cue is None:
                    continue
                cue = " ".join(v.cue.lower().split())
                where = f"{s.domain}/{s.id}/{d.id}/{v.id}"
                if d.name.lower() in cue:
                    p.append(f"{where}: cue names the dimension {d.name!r}")
                text = v.text.lower().rstrip(".").strip()
                if text and text in cue:
                    p.append(f"{where}: cue quotes the value text {v.text!r}")
                if cue in seen:
                    p.append(f"{where}: same cue as {seen[cue]}")
                seen[cue] = where
    return p
