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
    ("iba-fc", "cannot be measured without a model"),
])
def test_configurations_that_need_a_model_are_refused(spec, named):
    with pytest.raises(ValueError, match=named):
        check_spec(spec)
