"""The reach of a configuration without a model is the reach of the prompts its agent really builds."""

from __future__ import annotations

import pytest

from iba.agents.base import parse_agent_spec
from iba.agents.iba_agent import IBAAgent
from iba.agents.rag import RagAgent
from iba.eval.reach import deciding_prompts
from iba.run.prompt_reach import SpecPrompts, check_spec
from tests.agents.helpers import API_TASK, TEXT_TASK, env, small_history
from tests.fakes import ScriptedBackend

SPECS = [
    "rag?size=64&overlap=10",
    "iba?expansion=template&reranker=rules&compact=none&size=64&overlap=10",
    "iba?expansion=template&reranker=rules&compact=none&align=slots&size=64&overlap=10",
    "iba?expansion=template&reranker=rules&btda=false&size=64&overlap=10",
    "iba?retrieval=false&compact=none&size=64&overlap=10",
]


def _empty(messages, kwargs):
    """The emptiest valid reply of each step: no preferences, an empty plan, unknown, fixed params."""
    schema = kwargs.get("json_schema")
    if not schema:
        return "ok"
    props = schema.get("properties", {})
    if "preferences" in props:
        return {"preferences": []}
    if "value" in props:
        return {"value": "unknown"}
    if "cuisine" in props:
        return {"cuisine": "italian", "spice_level": "none", "servings": 2}
    return {}


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("task", [TEXT_TASK, API_TASK], ids=["generate", "call_api"])
async def test_model_free_prompts_are_the_agents_own(tmp_path, spec, task):
    history = small_history()
    for budget in (600, 2000):
        want = await SpecPrompts(spec, task, history, tmp_path / "cache").prompts(budget)
        name, options = parse_agent_spec(spec)
        backend = ScriptedBackend(_empty)
        cls = RagAgent if name == "rag" else IBAAgent
        action = await cls(env(backend, tmp_path), **options, budget=str(budget)).act(task, history)
        got = deciding_prompts(action.trace)
        if name == "iba":  # the model-free measure leaves out align_plan, whose prompt holds no evidence
            got = [p for p in got if p.step != "align_plan"]
        assert got == want


@pytest.mark.parametrize("spec, named", [
    ("iba", "expansion=llm, reranker=llm, compact=llm"),
    ("iba?expansion=template&reranker=rules", "compact=llm"),
    ("iba?expansion=template&reranker=rules&compact=none&states=true", "states=true"),
    ("iba-fc", "cannot be measured without a model"),
])
def test_configurations_that_need_a_model_are_refused(spec, named):
    with pytest.raises(ValueError, match=named):
        check_spec(spec)


def test_with_a_model_the_llm_steps_may_run_but_not_a_chain():
    check_spec("iba", model=True)
    check_spec("iba?expansion=template&reranker=rules&compact=none&states=true", model=True)
    with pytest.raises(ValueError, match="chain"):
        check_spec("iba?chain=true", model=True)
    with pytest.raises(ValueError, match="cannot be measured"):
        check_spec("iba-fc", model=True)


@pytest.mark.slow
async def test_reach_with_a_real_model_runs_its_expansion_and_state_calls(smollm_backend, tmp_path):
    """bench/reach.py --model: the deciding prompts are built after the spec's real LLM steps (the
    packaged SmolLM2 writes the facet and state queries, which are then searched)."""
    spec = "iba?reranker=rules&compact=none&states=true&size=64&overlap=10"
    sp = SpecPrompts(spec, API_TASK, small_history(), tmp_path / "cache", backend=smollm_backend)
    prompts = await sp.prompts(1000)
    assert [p.step for p in prompts][-1] == "synthesize" and all(p.text for p in prompts)
    steps = {s.step: s for s in sp._tools.trace.steps}
    assert steps["expand_queries"].llm_calls >= 1 and steps["expand_queries"].prompt == "agent_query_expansion"
    state = steps["state_queries"]
    assert state.llm_calls >= 1 and state.prompt == "agent_state_queries" and state.prompt_hash and state.outputs
    searched = [label for label, _ in sp._tools.deep.rankings]
    assert searched.count("state") == len(state.outputs)
