import pytest
from pydantic import ValidationError

from iba.types import Action, ApiParam, ApiTemplate, PreferenceValue, TaskView, stable_hash


def test_extra_fields_forbidden():
    with pytest.raises(ValidationError):
        TaskView(instance_id="i", user_id="u", domain="d", scenario="s", scenario_name="S", query="q",
                 action="generate", now="t", answer="leak")


def test_action_shapes():
    with pytest.raises(ValidationError):
        Action(kind="generate")
    with pytest.raises(ValidationError):
        Action(kind="call_api", text="hi")
    assert Action(kind="call_api", params={}).params == {}


def test_dynamic_value_needs_both_ends():
    with pytest.raises(ValidationError):
        PreferenceValue(id="x", text="t", from_value="a")
    with pytest.raises(ValidationError):
        PreferenceValue(id="x", text="t")  # static without a cue
    assert PreferenceValue(id="x", text="t", from_value="a", to_value="b").dynamic


def test_api_json_schema():
    api = ApiTemplate(name="order", params=[ApiParam(name="spice", enum=["mild", "hot"], slot=True),
                                            ApiParam(name="n", type="integer", minimum=1, required=False)])
    s = api.json_schema()
    assert s["required"] == ["spice"] and s["properties"]["spice"]["enum"] == ["mild", "hot"]
    assert s["properties"]["n"] == {"type": "integer", "minimum": 1} and s["additionalProperties"] is False


def test_stable_hash_is_order_independent():
    assert stable_hash({"a": 1, "b": 2}) == stable_hash({"b": 2, "a": 1}) != stable_hash({"a": 2, "b": 1})
