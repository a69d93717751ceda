"""Every agent once on a real model: the embedded SmolLM2 and, over HTTP, a local llama_cpp.server.

Quality is not the point (a 135M model); the point is that prompts, constrained JSON, tool calls,
traces and token accounting work end to end with real backends. Slow: minutes on 2 shared cores.
"""

from __future__ import annotations

import pytest

from iba import registry
from iba.agents.api_params import validate_params
from iba.agents.base import AgentEnv, parse_agent_spec
from iba.dataset import Dataset
from iba.llm import resolve_backend
from tests.agents.helpers import API_TASK, TEXT_TASK, small_history
from tests.construct.conftest import demo_dir  # noqa: F401  (the demo build)

pytestmark = pytest.mark.slow

QUICK = "max_tokens=48&size=64&overlap=10"


def _agent(spec: str, backend, tmp_path):
    name, opts = parse_agent_spec(spec)
    return registry.resolve("agents", name)(AgentEnv(backend=backend, cache_dir=tmp_path / "cache"), **opts)


def _check(action, task, steps):
    assert action.kind == task.action
    if task.action == "call_api":
        assert validate_params(task.api_schema, action.params) == action.params
    else:
        assert action.text and action.text.strip()
    names = [s.step for s in action.trace]
    for step in steps:
        assert step in names, (step, names)
    llm = [s for s in action.trace if s.llm_calls]
    assert llm and all(s.prompt_tokens > 0 and s.completion_tokens > 0 and s.prompt_hash for s in llm)


@pytest.mark.parametrize(
    "spec, task, steps",
    [
        ("direct?max_tokens=48", API_TASK, ["truncate_history", "answer"]),
        (f"rag?{QUICK}", TEXT_TASK, ["build_index", "similarity_retrieve", "answer"]),
        (f"iba?{QUICK}", API_TASK, ["expand_queries", "rerank_salience", "compact_evidence", "extract_preferences", "align_plan", "synthesize"]),
        (f"iba?{QUICK}&expansion=template&reranker=rules&align=slots", API_TASK, ["align_slot", "synthesize"]),
        (f"iba?{QUICK}&expansion=template&reranker=rules&compact=none&budget=1000", TEXT_TASK, ["extract_preferences", "align_plan", "synthesize"]),
        (f"iba-fc?{QUICK}&choice=plan&expansion=template&reranker=rules&compact=none", API_TASK, ["controller", "final_output"]),
    ],
)
async def test_agent_on_embedded_model(spec, task, steps, smollm_backend, tmp_path):
    action = await _agent(spec, smollm_backend, tmp_path).act(task, small_history())
    _check(action, task, steps)


async def test_agents_over_http(llama_server, tmp_path):
    backend = resolve_backend("openai:smollm2", base_url=llama_server, use_cache=False)
    rag = await _agent(f"rag?{QUICK}", backend, tmp_path).act(API_TASK, small_history())
    _check(rag, API_TASK, ["similarity_retrieve", "answer"])
    fc = await _agent(f"iba-fc?{QUICK}&max_steps=3&expansion=template&reranker=rules", backend, tmp_path).act(
        TEXT_TASK, small_history()
    )
    _check(fc, TEXT_TASK, ["controller", "synthesize"])
    # the action came from the last controller step's final_output call, which only a free choice or a
    # forced final_output can make (a step forced to another tool calls that tool)
    last = [s for s in fc.trace if s.step == "controller"][-1]
    assert "final_output" in [c["name"] for c in last.outputs["tool_calls"]]
    assert last.inputs["tool_choice"] in ("auto", "final_output")


async def test_cheap_preset_costs_what_rag_costs(smollm_backend, demo_dir, tmp_path):
    """`iba?preset=cheap` on the demo build with an embedded model (SmolLM2): one LLM call per action,
    at most 1.2k prompt tokens as the model counted them (rag's price), with the evidence view left
    to fill the budget (turns were left out, so the bound held against a history larger than it)."""
    ds = Dataset(demo_dir)
    agent = _agent("iba?preset=cheap&max_tokens=80", smollm_backend, tmp_path)
    for kind in ("call_api", "generate"):
        task = next(t for t in ds.instances if t.action == kind)
        action = await agent.act(task, ds.history(task.user_id))
        _check(action, task, ["rerank_salience", "synthesize"])
        llm = [s for s in action.trace if s.llm_calls]
        assert [s.step for s in llm] == ["synthesize"] and llm[0].llm_calls == 1
        assert 0 < llm[0].prompt_tokens <= 1200, llm[0].prompt_tokens
        assert llm[0].inputs["view"]["left_out"] > 0
