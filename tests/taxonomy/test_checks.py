"""`check_state` (iba.taxonomy.checks): a state's constraints must name static values of known
scenarios. Until the split these checks ran only inside the loader, and no test covered them."""

from __future__ import annotations

import pytest
import yaml

from iba.taxonomy import TaxonomyError, default_data_dir, load_taxonomy
from iba.taxonomy.checks import check_state
from iba.types import StateConstraint, TransientState


@pytest.fixture(scope="module")
def scenarios():
    return {s.id: s for s in load_taxonomy().scenarios()}


def _state(*constraints: tuple[str, str, str], cues: list[str] | None = None) -> TransientState:
    return TransientState(
        id="demo", description="Demo state.", cues=["a passing remark"] if cues is None else cues,
        constrains=[StateConstraint(scenario=s, dimension=d, value=v) for s, d, v in constraints],
    )


def test_shipped_states_pass(scenarios):
    for i, st in enumerate(load_taxonomy().states):
        assert check_state(st, f"states[{i}]", scenarios) == []


def test_each_bad_constraint_is_named_by_key_path(scenarios):
    st = _state(
        ("no_such_scenario", "texture", "soft"),
        ("food_ordering", "no_such_dimension", "soft"),
        ("food_ordering", "texture", "no_such_value"),
        ("food_ordering", "texture", "soft"),
    )
    p = check_state(st, "states[7]", scenarios)
    assert len(p) == 3
    assert p[0] == "states[7].constrains[0].scenario: unknown scenario 'no_such_scenario'"
    assert p[1].startswith("states[7].constrains[1].dimension: scenario 'food_ordering' has no dimension 'no_such_dimension'")
    assert p[2].startswith("states[7].constrains[2].value: 'no_such_value' is not a static value of food_ordering.texture")


def test_dynamic_value_is_not_a_valid_constraint(scenarios):
    s = next(s for s in scenarios.values() if any(v.dynamic for d in s.dimensions for v in d.values))
    d = next(d for d in s.dimensions if any(v.dynamic for v in d.values))
    dyn = next(v for v in d.values if v.dynamic)
    (p,) = check_state(_state((s.id, d.id, dyn.id)), "states[0]", scenarios)
    assert f"'{dyn.id}' is not a static value of {s.id}.{d.id}" in p


def test_a_state_needs_cues_and_constraints(scenarios):
    assert check_state(_state(cues=[]), "states[0]", scenarios) == [
        "states[0].cues: a state needs at least one cue",
        "states[0].constrains: a state needs at least one constraint",
    ]


def test_loader_prefixes_the_file_and_reports_duplicate_ids(tmp_path):
    for p in default_data_dir().glob("*.yaml"):
        (tmp_path / p.name).write_text(p.read_text(encoding="utf-8"), encoding="utf-8")
    states = yaml.safe_load((tmp_path / "states.yaml").read_text(encoding="utf-8"))
    states[0]["constrains"][0]["scenario"] = "no_such_scenario"
    states[1]["id"] = states[2]["id"]
    path = tmp_path / "states.yaml"
    path.write_text(yaml.safe_dump(states), encoding="utf-8")
    with pytest.raises(TaxonomyError) as ei:
        load_taxonomy(tmp_path)
    assert ei.value.problems == [
        f"{path}: states[0].constrains[0].scenario: unknown scenario 'no_such_scenario'",
        f"{path}: states: duplicate state id {states[2]['id']!r}",
    ]
