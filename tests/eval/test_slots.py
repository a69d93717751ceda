"""CallAPI slot matching: normalisation, synonyms, numbers, ranges, schema validity."""

from __future__ import annotations

import pytest

from iba.eval.slots import normalize, score_slots, validate_action, value_matches
from iba.types import Action, AnswerKey, ApiParam, ApiTemplate, Slot

TEMPLATE = ApiTemplate(
    name="order_food",
    params=[
        ApiParam(name="cuisine", enum=["sichuan", "cantonese", "japanese"], slot=True, dimension="cuisine"),
        ApiParam(name="spice_level", enum=["none", "mild", "hot"], slot=True, dimension="spice"),
        ApiParam(name="budget", type="number", minimum=0, maximum=500, slot=True, dimension="budget", required=False),
        ApiParam(name="servings", type="integer", minimum=1, maximum=10),
        ApiParam(name="note", required=False),
    ],
    synonyms={"mild": ["low spice", "slightly spicy"], "sichuan": ["szechuan"]},
)
KEY = AnswerKey(
    instance_id="i1",
    slots=[
        Slot(id="s-cuisine", param="cuisine", dimension="cuisine", value="sichuan", accepted=["sichuan"], evidence=[]),
        Slot(id="s-spice", param="spice_level", dimension="spice", value="mild", accepted=["mild", "none"], evidence=[]),
        Slot(id="s-budget", param="budget", dimension="budget", value="low", accepted=["<=30"], evidence=[]),
    ],
    fixed_params={"servings": 2},
)


def call(**params) -> Action:
    return Action(kind="call_api", api_name="order_food", params=params)


@pytest.mark.parametrize(
    "value,accepted,expected",
    [
        ("Sichuan", ["sichuan"], True),
        ("  SICHUAN ", ["sichuan"], True),
        ("low_spice", ["mild"], True),           # underscore + synonym
        ("Slightly-Spicy", ["mild"], True),      # hyphen + case + synonym
        ("szechuan", ["sichuan"], True),
        ("hot", ["mild", "none"], False),
        ("3", [3], True),                          # numeric string vs number
        (3.0, ["3"], True),
        (-2, ["-2"], True),                        # the minus sign survives normalisation
        (4, [3], False),
        (25, ["<=30"], True),
        ("30", ["<=30"], True),
        (31, ["<=30"], False),
        (30, ["<30"], False),
        (3, [">=3"], True),
        (2.5, ["2..5"], True),
        (5, ["2..5"], True),
        (6, ["2..5"], False),
        ("cheap", ["<=30"], False),                # a range needs a number
        (True, [True], True),
        ("yes", [True], True),
        ("no", [True], False),
        (1, [True], False),                        # a number is not a boolean
        (None, ["sichuan"], False),
        (["sichuan"], ["sichuan"], False),         # lists are not scalar values
    ],
)
def test_value_matches(value, accepted, expected):
    syn = {"low spice": "mild", "slightly spicy": "mild", "szechuan": "sichuan", "mild": "mild", "sichuan": "sichuan"}
    assert value_matches(value, accepted, syn) is expected


def test_normalize():
    assert normalize(" Very__Spicy - Food ") == "very spicy food"
    assert normalize("12") == 12.0 and normalize(12) == 12.0
    assert normalize(True) is True


def test_valid_action_scores_each_slot_and_ignores_fixed_params():
    rec = score_slots(call(cuisine="szechuan", spice_level="Hot", budget=20, servings=7), KEY, TEMPLATE, run_key="k")
    assert not rec.invalid_action
    assert [v.passed for v in rec.verdicts] == [True, False, True]
    assert rec.score == pytest.approx(2 / 3)  # servings=7 differs from the task's 2 but is not a slot
    assert rec.scorer == "slots" and rec.run_key == "k"
    assert "does not satisfy" in rec.verdicts[1].rationale


def test_optional_slot_left_out_scores_zero():
    rec = score_slots(call(cuisine="sichuan", spice_level="none", servings=2), KEY, TEMPLATE)
    assert [v.passed for v in rec.verdicts] == [True, True, False]
    assert rec.score == pytest.approx(2 / 3)


@pytest.mark.parametrize(
    "action,reason",
    [
        (call(spice_level="mild", servings=2), "missing required parameter 'cuisine'"),
        (call(cuisine="sichuan", spice_level="mild", servings="2"), "should be integer"),
        (call(cuisine="sichuan", spice_level="mild", servings=2.5), "should be integer"),
        (call(cuisine="thai", spice_level="mild", servings=2), "not one of"),
        (call(cuisine="sichuan", spice_level="mild", servings=2, extra=1), "unknown parameter(s) extra"),
        (call(cuisine="sichuan", spice_level="mild", servings=20), "above the maximum"),
        (call(cuisine="sichuan", spice_level="mild", servings=2, budget=-1), "below the minimum"),
        (Action(kind="call_api", api_name="book_taxi", params={"cuisine": "sichuan"}), "called 'book_taxi'"),
        (Action(kind="generate", text="I ordered Sichuan food"), "a generate action on a call_api task"),
    ],
)
def test_invalid_actions_score_zero_and_are_flagged(action, reason):
    assert reason in (validate_action(action, TEMPLATE) or "")
    rec = score_slots(action, KEY, TEMPLATE)
    assert rec.invalid_action
    assert rec.score == 0.0
    assert all(v.passed is False and reason in v.rationale for v in rec.verdicts)


def test_synonym_and_case_are_valid_enum_values():
    assert validate_action(call(cuisine="Szechuan", spice_level="LOW-SPICE", servings=2), TEMPLATE) is None
    assert validate_action(call(cuisine="sichuan", spice_level="mild", servings=2.0, note=None), TEMPLATE) is None


def test_without_template_only_matching():
    rec = score_slots(call(cuisine="SICHUAN", spice_level="mild", unknown=1), KEY, None)
    assert not rec.invalid_action
    assert [v.passed for v in rec.verdicts] == [True, True, False]
    gen = score_slots(Action(kind="generate", text="x"), KEY, None)
    assert gen.invalid_action and gen.score == 0.0


def test_no_slots_is_unscored():
    rec = score_slots(call(cuisine="sichuan", spice_level="mild", servings=2), AnswerKey(instance_id="i"), TEMPLATE)
    assert rec.score is None and rec.verdicts == []


def test_chance_score_is_the_share_of_allowed_values_that_satisfy_each_slot():
    from iba.eval.slots import chance_score, choices

    schema = {"properties": {
        "cuisine": {"type": "string", "enum": ["sichuan", "cantonese", "japanese"]},
        "spice_level": {"type": "string", "enum": ["none", "mild", "hot"]},
        "budget": {"type": "number", "minimum": 0, "maximum": 500},  # no finite set: left out
    }}
    # cuisine 1 of 3, spice 2 of 3 (mild or none); budget has no finite choice set
    assert chance_score(KEY, schema) == pytest.approx((1 / 3 + 2 / 3) / 2)
    # a synonym of the template is an accepted value's other name, not an extra allowed value
    assert chance_score(KEY, schema, TEMPLATE) == pytest.approx(0.5)
    assert chance_score(KEY, {"properties": {"budget": schema["properties"]["budget"]}}) is None
    assert choices({"type": "boolean"}) == [True, False]
    assert choices({"type": "integer", "minimum": 1, "maximum": 4}) == [1, 2, 3, 4]
    assert choices({"type": "integer", "minimum": 0, "maximum": 1000}) is None
    always = AnswerKey(instance_id="i2", slots=[Slot(id="s", param="cuisine", dimension="cuisine", value="x",
                                                     accepted=["sichuan", "cantonese", "japanese"], evidence=[])])
    assert chance_score(always, schema) == 1.0
