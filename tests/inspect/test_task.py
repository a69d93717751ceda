"""The inspect_ai task with inspect's `mockllm` model (plumbing): the same agent and the same
scripted replies score the same through inspect as through `iba run`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("inspect_ai")

from inspect_ai import eval as inspect_eval  # noqa: E402
from inspect_ai.model import ModelOutput, ModelUsage, get_model  # noqa: E402

from iba.construct.builder import build_dataset  # noqa: E402
from iba.dataset import Dataset  # noqa: E402
from iba.inspect import iba_bench  # noqa: E402
from iba.inspect.backend import InspectBackend, inline_refs  # noqa: E402
from iba.llm.base import ToolSpec  # noqa: E402
from iba.run.runner import RunConfig, run_dataset  # noqa: E402
from iba.run.store import Store  # noqa: E402
from tests.fakes import ScriptedBackend  # noqa: E402


def example(schema: dict) -> object:
    """A minimal value of a JSON schema (the scripted model's JSON replies)."""
    schema = inline_refs(schema)
    if "anyOf" in schema:
        return example(schema["anyOf"][0])
    if "enum" in schema:
        return schema["enum"][-1]
    t = schema.get("type")
    if t == "object":
        return {k: example(v) for k, v in (schema.get("properties") or {}).items() if k in schema.get("required", [])}
    return {"string": "x", "integer": schema.get("minimum", 1), "number": 1.0, "boolean": True, "array": []}.get(t, "x")


def reply(text: str, schema: dict | None) -> str:
    if schema and "passed" in (schema.get("properties") or {}):
        return json.dumps({"passed": len(text) % 3 != 0, "rationale": f"length {len(text)}"})
    if schema:
        return json.dumps(example(schema))
    return "Here is the plan, in plain steps: first list the inputs, then the outputs."


def mock_outputs(input, tools, tool_choice, config):
    schema = config.response_schema.json_schema.model_dump(exclude_none=True) if config.response_schema else None
    out = ModelOutput.from_content("mockllm", reply(input[-1].text, schema))
    out.usage = ModelUsage(input_tokens=10, output_tokens=5, total_tokens=15)  # else mockllm fetches a tokenizer
    return out


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("demo")
    build_dataset(root, preset="demo", seed=42, progress=False)
    return root


def run_inspect(demo, tmp_path, **task_args):
    model = get_model("mockllm/model", custom_outputs=mock_outputs, memoize=False)
    task = iba_bench(dataset=str(demo), cache_dir=str(tmp_path / "cache"), **task_args)
    (log,) = inspect_eval(task, model=model, log_dir=str(tmp_path / "logs"), display="none")
    assert log.status == "success", log.error
    return log


def test_inspect_scores_what_iba_run_scores(demo, tmp_path):
    log = run_inspect(demo, tmp_path, agent="rag", limit=2)
    got = {s.id: {k: v.value for k, v in s.scores.items()} for s in log.samples}
    assert len(got) == 2

    ds = Dataset(demo)
    scripted = ScriptedBackend(lambda m, k: reply(m[-1]["content"], k.get("json_schema")), model_id="scripted:m")
    cfg = RunConfig(agents=["rag"], limit=2, progress=False, cache_dir=tmp_path / "cache")
    with Store(tmp_path / "s.sqlite") as store:
        import asyncio

        asyncio.run(run_dataset(ds, scripted, store, cfg, judges=[scripted]))
        runs = {r.key: r.instance_id for r in store.runs()}
        want: dict[str, dict[str, float]] = {}
        for rec in store.scores():
            name = {"slots": "iba_slots", "verifiers": "iba_verifiers"}.get(rec.scorer, "iba_judge")
            want.setdefault(runs[rec.run_key], {})[name] = rec.score
    assert got == want
    assert {k for v in got.values() for k in v} == {"iba_slots", "iba_verifiers", "iba_judge"}
    judge = [v["iba_judge"] for v in got.values() if "iba_judge" in v]
    assert judge and 0 < judge[0] < 1  # the scripted judge passes some checkpoints, not all
    # Table 4's columns: a mean per domain and overall, with a standard error
    metrics = {s.name: set(s.metrics) for s in log.results.scores}
    assert metrics["iba_slots"] >= {"daily", "all", "stderr"} and metrics["iba_judge"] >= {"writing", "all"}
    sample = log.samples[0]
    assert sample.store["iba_record"]["agent"] == "rag" and sample.output.completion


def test_options_reach_the_selection_and_bad_ones_are_said(demo, tmp_path):
    log = run_inspect(demo, tmp_path, agent="direct?max_tokens=32", domains="daily", judges=False)
    assert {s.metadata["domain"] for s in log.samples} == {"daily"}
    assert {s.name for s in log.results.scores} == {"iba_slots", "iba_verifiers"}
    with pytest.raises(KeyError, match="unknown agent 'nope'"):
        iba_bench(dataset=str(demo), agent="nope", cache_dir=str(tmp_path / "c"))
    with pytest.raises(ValueError, match="oracle reference reads the answer key"):
        iba_bench(dataset=str(demo), agent="oracle", cache_dir=str(tmp_path / "c"))
    with pytest.raises(ValueError, match="-T domains: 'mars' is not in this dataset"):
        iba_bench(dataset=str(demo), domains="mars", cache_dir=str(tmp_path / "c"))


def test_a_held_back_key_is_read_only_by_the_scorers(demo, tmp_path):
    import shutil

    public = tmp_path / "public"
    shutil.copytree(demo, public)
    key = tmp_path / "key" / "answer_key.jsonl"
    key.parent.mkdir()
    shutil.move(public / "answer_key.jsonl", key)
    log = run_inspect(public, tmp_path, agent="rag", limit=2, answer_key=str(key))
    assert all(s.scores for s in log.samples)


async def test_the_backend_maps_tools_and_json_to_inspect():
    seen = {}

    def fn(input, tools, tool_choice, config):
        seen.update(input=input, tools=tools, tool_choice=tool_choice, config=config)
        out = ModelOutput.for_tool_call("mockllm", "order_food", {"dish": "pho"})
        out.usage = ModelUsage(input_tokens=7, output_tokens=3, total_tokens=10)
        return out

    backend = InspectBackend(get_model("mockllm/model", custom_outputs=fn, memoize=False))
    tool = ToolSpec(name="order_food", description="Order.", parameters={
        "type": "object", "properties": {"dish": {"type": "string"}}, "required": ["dish"]})
    msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "order_food", "arguments": '{"dish": "ramen"}'}}]},
            {"role": "tool", "tool_call_id": "c1", "name": "order_food", "content": "sold out"}]
    comp = await backend.complete(msgs, tools=[tool], tool_choice="order_food", max_tokens=20, seed=3)
    assert [m.role for m in seen["input"]] == ["system", "user", "assistant", "tool"]
    assert seen["input"][2].tool_calls[0].arguments == {"dish": "ramen"}
    assert seen["tools"][0].name == "order_food" and seen["tool_choice"].name == "order_food"
    assert seen["config"].max_tokens == 20 and seen["config"].seed == 3
    assert comp.tool_calls[0].arguments == {"dish": "pho"} and comp.prompt_tokens == 7
    assert comp.finish_reason == "tool_calls" and comp.model == "inspect:mockllm/model"


def test_inline_refs():
    schema = {"type": "object", "properties": {"v": {"type": "array", "items": {"$ref": "#/$defs/Item"}}},
              "$defs": {"Item": {"type": "object", "properties": {"id": {"type": "string"}}}}}
    assert inline_refs(schema) == {"type": "object", "properties": {"v": {"type": "array", "items": {
        "type": "object", "properties": {"id": {"type": "string"}}}}}}
