"""The taxonomy loader on the shipped data and on malformed data."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
import yaml

from iba.taxonomy import (
    DOMAIN_ORDER,
    PAPER_SCENARIOS,
    PAPER_TABLE13,
    PAPER_TOTALS,
    VERIFIER_IDS,
    TaxonomyError,
    default_data_dir,
    lint_taxonomy,
    load_taxonomy,
    table13_problems,
    taxonomy_totals,
    validate_totals,
)

# --------------------------------------------------------------------------- shipped data


@pytest.fixture(scope="module")
def tax():
    return load_taxonomy()


def test_shipped_taxonomy_loads_in_domain_order(tax):
    ids = [d.id for d in tax.domains]
    assert ids, "no domain files shipped"
    assert ids == [d for d in DOMAIN_ORDER if d in ids]
    assert re.fullmatch(r"iba-taxonomy/1\+[0-9a-f]{12}", tax.version)
    assert load_taxonomy() is tax  # cached for the default folder
    again = load_taxonomy(default_data_dir())
    assert again is not tax and again.version == tax.version  # same content, same hash


def test_walking_skeleton_scenario_is_complete(tax):
    s = tax.scenario("technical_documentation")
    assert (s.domain, s.action, s.dynamic) == ("writing", "generate", True)
    dims = {d.id: d for d in s.dimensions}
    assert set(dims) == {"document_structure", "technical_depth", "example_code_style", "api_explanation"}
    code = dims["example_code_style"]
    assert code.value("complete").verifier.id == "has_code_block"
    dyn = code.value("complete_to_pseudocode")
    assert (dyn.dynamic, dyn.from_value, dyn.to_value) == (True, "complete", "pseudocode")
    for task in s.tasks:
        assert task.format(topic=s.topics[0])  # only {topic} placeholders


def test_present_domains_match_table13_scenario_by_scenario(tax):
    assert table13_problems(tax, partial=True) == []
    for d in tax.domains:
        assert [s.id for s in d.scenarios] == PAPER_SCENARIOS[d.id]


def test_full_totals_of_table13():
    assert [d for d in DOMAIN_ORDER if not (default_data_dir() / f"{d}.yaml").exists()] == []
    tax = load_taxonomy()
    totals = taxonomy_totals(tax)
    expected = {"domains": 9, "scenarios": 66, "dimensions": 262, "values": 997,
                "call_api_scenarios": 16, "dynamic_scenarios": 43, "generate_scenarios": 50}
    assert {k: totals[k] for k in expected} == expected
    assert totals["instances"] == PAPER_TOTALS["instances"] == 6962
    assert totals["static_values"] + totals["dynamic_values"] == totals["values"]
    validate_totals(tax)  # raises on any per-scenario difference


def test_paper_table13_constant_adds_up():
    rows = PAPER_TABLE13.values()
    assert len(PAPER_TABLE13) == 66
    assert sum(r[0] for r in rows) == 262 and sum(r[1] for r in rows) == 997
    assert sum(r[2] for r in rows) == 6962 and sum(r[3] for r in rows) == 43
    assert sum(r[4] == "call_api" for r in rows) == 16
    assert list(PAPER_SCENARIOS) == list(DOMAIN_ORDER)


def test_shipped_values_are_well_formed(tax):
    for s in tax.scenarios():
        assert 1 <= len(s.tasks) and all("{topic}" not in t or s.topics for t in s.tasks)
        assert s.dynamic == any(d.dynamic for d in s.dimensions), s.id
        for d in s.dimensions:
            static = [v for v in d.values if not v.dynamic]
            assert len(static) >= 2, f"{s.id}/{d.id}"
            assert len({v.cue for v in static}) == len(static), f"{s.id}/{d.id}: repeated cue"
            for v in d.values:
                if v.verifier is not None:
                    assert v.verifier.id in VERIFIER_IDS


def test_cues_do_not_name_their_dimension(tax):
    offenders = [
        f"{s.id}/{d.id}/{v.id}"
        for s in tax.scenarios()
        for d in s.dimensions
        for v in d.values
        if v.cue and d.name.lower() in v.cue.lower()
    ]
    assert offenders == []
    assert lint_taxonomy(tax) == []


def test_lint_catches_a_giveaway_cue(tax):
    bad = copy.deepcopy(tax)
    dim = bad.scenario("technical_documentation").dimensions[2]
    dim.values[0].cue = "Please use my usual example code style."
    dim.values[1].cue = dim.values[2].cue
    problems = lint_taxonomy(bad)
    assert any("example_code_style/complete: cue names the dimension" in p for p in problems)
    assert any("same cue as" in p for p in problems)


def test_my_domains_have_verifiers_on_a_fifth_of_values(tax):
    for did in ("writing", "work", "planning"):
        domain = next((d for d in tax.domains if d.id == did), None)
        if domain is None:
            continue
        values = [v for s in domain.scenarios for d in s.dimensions for v in d.values]
        share = sum(v.verifier is not None for v in values) / len(values)
        assert share >= 0.18, f"{did}: only {share:.0%} of values have a verifier"


# --------------------------------------------------------------------------- malformed data

STATIC = [
    {"id": "short", "text": "Prefers short answers.", "cue": "keep it brief please", "verifier": {"id": "word_count_max", "params": {"max": 100}}},
    {"id": "long", "text": "Prefers long answers.", "cue": "I like every detail spelled out"},
]


def _domain(did: str = "writing", sid: str = "demo_scenario") -> dict:
    return {
        "id": did,
        "name": "Writing and Design",
        "short": "Writing",
        "scenarios": [
            {
                "id": sid,
                "name": "Demo",
                "action": "generate",
                "dynamic": True,
                "paper_instances": 3,
                "tasks": ["Write about {topic}."],
                "topics": ["cats"],
                "dimensions": [
                    {
                        "id": "answer_length",
                        "name": "Answer length",
                        "values": [*copy.deepcopy(STATIC), {"id": "short_to_long", "text": "Was short; now long.", "from_value": "short", "to_value": "long"}],
                    },
                    {"id": "voice", "name": "Voice", "values": [
                        {"id": "first", "text": "First person.", "cue": "talk as me"},
                        {"id": "third", "text": "Third person.", "cue": "keep me out of it"},
                    ]},
                ],
            }
        ],
    }


def _api_domain() -> dict:
    return {
        "id": "daily",
        "name": "Daily Consumption",
        "short": "Daily",
        "scenarios": [
            {
                "id": "food_demo",
                "name": "Food demo",
                "action": "call_api",
                "dynamic": False,
                "tasks": ["Order food."],
                "api": {
                    "name": "order_food",
                    "params": [
                        {"name": "spice_level", "enum": ["mild", "hot"], "slot": True, "dimension": "spice"},
                        {"name": "servings", "type": "integer", "minimum": 1, "maximum": 5},
                    ],
                },
                "dimensions": [
                    {"id": "spice", "name": "Spice", "values": [
                        {"id": "mild", "text": "Mild.", "cue": "go easy on the chili", "api": {"spice_level": ["mild"]}},
                        {"id": "hot", "text": "Hot.", "cue": "bring on the heat", "api": {"spice_level": ["hot"]}},
                    ]},
                ],
            }
        ],
    }


def _write(folder: Path, name: str, data) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True) if not isinstance(data, str) else data)
    return path


def _error(folder: Path) -> str:
    with pytest.raises(TaxonomyError) as ei:
        load_taxonomy(folder)
    return str(ei.value)


def test_minimal_valid_domain_loads(tmp_path):
    _write(tmp_path, "writing.yaml", _domain())
    _write(tmp_path, "daily.yaml", _api_domain())
    tax = load_taxonomy(tmp_path)
    assert [d.id for d in tax.domains] == ["writing", "daily"]  # fixed order, not alphabetical
    assert tax.scenario("demo_scenario").domain == "writing"
    totals = taxonomy_totals(tax)
    assert (totals["scenarios"], totals["dimensions"], totals["values"], totals["verifiable_values"]) == (2, 3, 7, 1)
    assert (totals["dynamic_scenarios"], totals["call_api_scenarios"]) == (1, 1)
    with pytest.raises(TaxonomyError, match="missing domains: work, planning"):
        validate_totals(tax)


def _mutate(fn):
    data = _domain()
    fn(data)
    return data


def _vals(d):
    return d["scenarios"][0]["dimensions"][0]["values"]


CASES = {
    "missing required field": (
        lambda d: _vals(d)[1].pop("text"),
        "scenarios[0].dimensions[0].values[1].text: Field required",
    ),
    "static value without cue": (
        lambda d: _vals(d)[0].pop("cue"),
        "scenarios[0].dimensions[0].values[0]: a static value needs a cue",
    ),
    "misspelt field": (
        lambda d: _vals(d)[0].update(cues="x"),
        "scenarios[0].dimensions[0].values[0].cues: Extra inputs are not permitted",
    ),
    "duplicate value id": (
        lambda d: _vals(d)[1].update(id="short"),
        "scenarios[0].dimensions[0].values: duplicate value id 'short'",
    ),
    "duplicate dimension id": (
        lambda d: d["scenarios"][0]["dimensions"][1].update(id="answer_length"),
        "scenarios[0].dimensions: duplicate dimension id 'answer_length'",
    ),
    "dynamic value names an unknown value": (
        lambda d: _vals(d)[2].update(to_value="medium"),
        "scenarios[0].dimensions[0].values[2].to_value: 'medium' is not a static value of dimension 'answer_length'",
    ),
    "dynamic value names itself": (
        lambda d: _vals(d)[2].update(to_value="short"),
        "values[2].to_value: a dynamic value must change to a different value",
    ),
    "dynamic value without to_value": (
        lambda d: _vals(d)[2].pop("to_value"),
        "scenarios[0].dimensions[0].values[2]: a dynamic value needs both from_value and to_value",
    ),
    "unknown verifier": (
        lambda d: _vals(d)[0].update(verifier={"id": "is_pretty"}),
        "scenarios[0].dimensions[0].values[0].verifier.id: unknown verifier 'is_pretty'",
    ),
    "verifier without its parameter": (
        lambda d: _vals(d)[0].update(verifier={"id": "item_count"}),
        "values[0].verifier.params.n: verifier 'item_count' needs parameter 'n'",
    ),
    "verifier with a bad range": (
        lambda d: _vals(d)[0].update(verifier={"id": "word_count_range", "params": {"min": 300, "max": 100}}),
        "values[0].verifier.params: min 300 is greater than max 100",
    ),
    "dimension with one static value": (
        lambda d: _vals(d).pop(1) and _vals(d).pop(1),
        "scenarios[0].dimensions[0].values: dimension 'answer_length' needs at least 2 static",
    ),
    "dynamic flag without dynamic values": (
        lambda d: _vals(d).pop(2),
        "scenarios[0].dynamic: is true but the scenario has no dynamic value",
    ),
    "unknown task placeholder": (
        lambda d: d["scenarios"][0]["tasks"].append("Write for {audience}."),
        "scenarios[0].tasks[1]: unknown placeholder(s) ['audience']",
    ),
    "domain id differs from file": (
        lambda d: d.update(id="work"),
        "id: domain id 'work' must equal the file name 'writing'",
    ),
    "wrong action literal": (
        lambda d: d["scenarios"][0].update(action="generate_text"),
        "scenarios[0].action: Input should be 'generate' or 'call_api'",
    ),
    "value api mapping in a generate scenario": (
        lambda d: _vals(d)[0].update(api={"x": ["y"]}),
        "values[0].api: only call_api scenarios map values to API parameters",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_malformed_domain_names_file_and_key(tmp_path, case):
    mutate, expected = CASES[case]
    path = _write(tmp_path, "writing.yaml", _mutate(mutate))
    msg = _error(tmp_path)
    assert f"{path}: " in msg
    assert expected in msg


def _api_vals(d):
    return d["scenarios"][0]["dimensions"][0]["values"]


API_CASES = {
    "slot param with unknown dimension": (
        lambda d: d["scenarios"][0]["api"]["params"][0].update(dimension="heat"),
        "scenarios[0].api.params[0].dimension: unknown dimension 'heat'",
    ),
    "slot param without dimension": (
        lambda d: d["scenarios"][0]["api"]["params"][0].pop("dimension"),
        "scenarios[0].api.params[0].dimension: slot parameter 'spice_level' must name the dimension",
    ),
    "value maps an unknown param": (
        lambda d: _api_vals(d)[0]["api"].update(spiciness=["mild"]),
        "values[0].api.spiciness: unknown API parameter 'spiciness'",
    ),
    "value maps a value outside the enum": (
        lambda d: _api_vals(d)[1]["api"].update(spice_level=["fiery"]),
        "values[1].api.spice_level: 'fiery' is not in the enum of 'spice_level'",
    ),
    "value maps a non-slot param": (
        lambda d: _api_vals(d)[1]["api"].update(servings=[2]),
        "values[1].api.servings: parameter 'servings' is not a slot driven by dimension 'spice'",
    ),
    "value of a slot dimension without mapping": (
        lambda d: _api_vals(d)[1].pop("api"),
        "values[1].api: value 'hot' must give the accepted values of slot 'spice_level'",
    ),
    "enum value of the wrong type": (
        lambda d: d["scenarios"][0]["api"]["params"][1].update(enum=[1, "two"]),
        "scenarios[0].api.params[1].enum: 'two' is not of type integer",
    ),
    "call_api scenario without api": (
        lambda d: d["scenarios"][0].pop("api"),
        "scenarios[0]: call_api scenarios need an api template",
    ),
}


@pytest.mark.parametrize("case", list(API_CASES))
def test_malformed_api_template_names_file_and_key(tmp_path, case):
    mutate, expected = API_CASES[case]
    data = _api_domain()
    mutate(data)
    path = _write(tmp_path, "daily.yaml", data)
    msg = _error(tmp_path)
    assert f"{path}: " in msg and expected in msg


def test_yaml_syntax_error_gives_line_number(tmp_path):
    text = yaml.safe_dump(_domain(), sort_keys=False)
    lines = text.splitlines()
    lines[5] = lines[5] + ": : ["  # break line 6
    path = _write(tmp_path, "writing.yaml", "\n".join(lines) + "\n")
    msg = _error(tmp_path)
    assert f"{path}: YAML syntax error at line " in msg
    assert re.search(r"line [67], column \d+", msg)


def test_duplicate_yaml_key_is_an_error(tmp_path):
    text = yaml.safe_dump(_domain(), sort_keys=False).replace("  name: Demo\n", "  name: Demo\n  name: Demo again\n")
    path = _write(tmp_path, "writing.yaml", text)
    msg = _error(tmp_path)
    assert f"{path}: YAML syntax error at line " in msg and "duplicate key 'name'" in msg


def test_duplicate_scenario_id_across_files(tmp_path):
    _write(tmp_path, "writing.yaml", _domain())
    work = _domain("work", "demo_scenario")
    work.update(name="Work", short="Work")
    path = _write(tmp_path, "work.yaml", work)
    msg = _error(tmp_path)
    assert f"{path}: scenarios[0].id: duplicate scenario id 'demo_scenario'" in msg
    assert str(tmp_path / "writing.yaml") in msg


def test_errors_of_several_files_are_all_reported(tmp_path):
    _write(tmp_path, "writing.yaml", _mutate(lambda d: _vals(d)[1].pop("text")))
    _write(tmp_path, "daily.yaml", "id: daily\nscenarios: [\n")
    msg = _error(tmp_path)
    assert "writing.yaml: scenarios[0].dimensions[0].values[1].text" in msg
    assert "daily.yaml: YAML syntax error" in msg


def test_empty_or_missing_folder(tmp_path):
    assert "no domain files" in _error(tmp_path)
    assert "not a directory" in _error(tmp_path / "nope")


STATE = {
    "id": "sore_throat",
    "description": "Has a sore throat.",
    "cues": ["my throat is killing me"],
    "constrains": [{"scenario": "demo_scenario", "dimension": "answer_length", "value": "short"}],
}


def test_states_load_and_are_checked(tmp_path):
    _write(tmp_path, "writing.yaml", _domain())
    _write(tmp_path, "states.yaml", [STATE])
    tax = load_taxonomy(tmp_path)
    assert [s.id for s in tax.states] == ["sore_throat"]
    assert taxonomy_totals(tax)["states"] == 1


@pytest.mark.parametrize(
    "field, bad, expected",
    [
        ("scenario", "food_ordering", "states[0].constrains[0].scenario: unknown scenario 'food_ordering'"),
        ("dimension", "tone", "states[0].constrains[0].dimension: scenario 'demo_scenario' has no dimension 'tone'"),
        ("value", "short_to_long", "states[0].constrains[0].value: 'short_to_long' is not a static value"),
        ("value", "medium", "states[0].constrains[0].value: 'medium' is not a static value"),
    ],
)
def test_state_constraint_must_name_existing_value(tmp_path, field, bad, expected):
    _write(tmp_path, "writing.yaml", _domain())
    state = copy.deepcopy(STATE)
    state["constrains"][0][field] = bad
    path = _write(tmp_path, "states.yaml", [state])
    msg = _error(tmp_path)
    assert f"{path}: {expected}" in msg


def test_state_missing_field(tmp_path):
    _write(tmp_path, "writing.yaml", _domain())
    state = copy.deepcopy(STATE)
    del state["cues"]
    path = _write(tmp_path, "states.yaml", {"states": [state]})
    assert f"{path}: states[0].cues: Field required" in _error(tmp_path)
