import json

import pytest
from pydantic import ValidationError

from iba.types import Action, ApiParam, ApiTemplate, PreferenceValue, RunRecord, TaskView, item_id, split_item_id, stable_hash


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


def test_a_qa_probe_is_a_field_and_an_old_id_reads_back_split():
    assert split_item_id("inst-1::qa::q1") == ("inst-1", "q1") and split_item_id("inst-1") == ("inst-1", None)
    assert item_id("inst-1", "q1") == "inst-1::qa::q1" and item_id("inst-1", None) == "inst-1"
    fields = dict(key="k", run="r", dataset="d", user_id="u", domain="x", scenario="s", agent="a", model="m",
                  status="ok", started_at="t", iba_version="0")
    old = '{"instance_id": "inst-1::qa::q1", ' + json.dumps(fields)[1:]  # as the code before the field wrote it
    rec = RunRecord.model_validate_json(old)
    assert (rec.instance_id, rec.probe) == ("inst-1", "q1")
    assert RunRecord.model_validate_json(rec.model_dump_json()) == rec
    assert RunRecord(instance_id="inst-1", **fields).probe is None


def test_a_task_without_a_probe_serialises_as_before():
    task = TaskView(instance_id="i", user_id="u", domain="d", scenario="s", scenario_name="S", query="q",
                    action="generate", now="t")
    assert "probe" not in task.model_dump_json() and "probe" not in task.model_dump(mode="json")
    qa = task.model_copy(update={"probe": "q1"})
    assert TaskView.model_validate_json(qa.model_dump_json()) == qa
