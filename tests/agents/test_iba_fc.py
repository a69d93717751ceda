import json

import pytest

from iba.agents.base import AgentError
from iba.agents.iba_fc import IBAFunctionCallingAgent
from iba.retrieval.deep import DeepRetrieval
from iba.llm.base import Completion
from tests.agents.helpers import API_TASK, TEXT_TASK, env, iba_reply, small_history
from tests.fakes import ScriptedBackend, tool_call_reply


class Controller:
    """Scripted controller turns (for calls with tools) + the IBA prompt replies for inner tool calls."""

    def __init__(self, turns, on_forced_final=None):
        self.turns = list(turns)
        self.on_forced_final = on_forced_final
        self.controller_calls = []

    def __call__(self, messages, kwargs):
        if kwargs.get("tools"):
            self.controller_calls.append((messages, kwargs))
            if kwargs.get("tool_choice") == "final_output" and self.on_forced_final is not None:
                return self.on_forced_final
            return self.turns.pop(0)
        return iba_reply(messages, kwargs)


def _agent(backend, tmp_path, **opts):
    return IBAFunctionCallingAgent(env(backend, tmp_path), size="64", overlap="10", **opts)


def _tool_results(messages):
    return [m for m in messages if m["role"] == "tool"]


async def test_loop_runs_tools_feeds_back_bad_args_and_finishes(tmp_path):
    ctl = Controller([
        tool_call_reply("search_history", {"k": "many"}, "c1"),  # bad: no query, k not an int
        tool_call_reply("search_history", {"query": "code examples in docs", "k": 2}, "c2"),
        tool_call_reply("expand_queries", {}, "c3"),
        tool_call_reply("rerank_evidence", {}, "c4"),
        tool_call_reply("extract_preferences", {}, "c5"),
        tool_call_reply("plan_alignment", {}, "c6"),
        tool_call_reply("final_output", {"notes": "keep it short"}, "c7"),
    ])
    backend = ScriptedBackend(ctl)
    action = await _agent(backend, tmp_path).act(TEXT_TASK, small_history())
    assert action.kind == "generate" and "runnable" in action.text
    steps = [s.step for s in action.trace]
    assert steps.count("controller") == 7
    assert steps[:2] == ["controller", "tool_error"]
    for needed in ["build_index", "similarity_retrieve", "expand_queries", "facet_retrieve", "filter_redundant",
                   "rerank_salience", "compact_evidence", "extract_preferences", "align_plan", "synthesize"]:
        assert needed in steps, needed
    # the bad call's error went back to the controller as the tool result, and the loop went on
    second_turn = ctl.controller_calls[1][0]
    first_result = _tool_results(second_turn)[0]
    assert first_result["tool_call_id"] == "c1" and first_result["content"].startswith("error: bad arguments for search_history")
    assert "query" in first_result["content"]
    # later results are real tool outputs
    last_turn = ctl.controller_calls[-1][0]
    assert any("[c0" in m["content"] for m in _tool_results(last_turn))
    assert all(k["tool_choice"] == "auto" for _, k in ctl.controller_calls)
    assert "keep it short" in backend.calls[-1][0][-1]["content"]
    controller_step = next(s for s in action.trace if s.step == "controller")
    assert controller_step.prompt == "agent_fc_controller" and controller_step.llm_calls == 1


async def test_step_bound_forces_the_final_tool(tmp_path):
    ctl = Controller(
        [tool_call_reply("search_history", {"query": f"query number {i}"}, f"c{i}") for i in range(10)],
        on_forced_final=tool_call_reply("final_output", {}, "final"),
    )
    action = await _agent(ScriptedBackend(ctl), tmp_path, max_steps="3").act(TEXT_TASK, small_history())
    assert action.kind == "generate"
    assert [k["tool_choice"] for _, k in ctl.controller_calls] == ["auto", "auto", "final_output"]


async def test_reply_without_tool_call_nudges_the_next_planned_tool(tmp_path):
    ctl = Controller([
        Completion(text="I think the user likes short docs."),
        tool_call_reply("search_history", {"query": "docs"}, "c1"),
        tool_call_reply("final_output", {}, "c2"),
    ])
    await _agent(ScriptedBackend(ctl), tmp_path).act(TEXT_TASK, small_history())
    assert [k["tool_choice"] for _, k in ctl.controller_calls] == ["auto", "search_history", "auto"]
    assert ctl.controller_calls[1][0][-1]["role"] == "user" and "Call one of the tools" in ctl.controller_calls[1][0][-1]["content"]


async def test_plan_mode_forces_each_tool_in_order(tmp_path):
    ctl = Controller([
        tool_call_reply("search_history", {"query": "docs style"}),
        tool_call_reply("expand_queries", {}),
        tool_call_reply("rerank_evidence", {}),
        tool_call_reply("extract_preferences", {}),
        tool_call_reply("plan_alignment", {}),
        tool_call_reply("final_output", {}),
    ])
    await _agent(ScriptedBackend(ctl), tmp_path, choice="plan").act(TEXT_TASK, small_history())
    assert [k["tool_choice"] for _, k in ctl.controller_calls] == [
        "search_history", "expand_queries", "rerank_evidence", "extract_preferences", "plan_alignment", "final_output"]


async def test_call_api_final_args_are_checked_against_the_schema(tmp_path):
    ctl = Controller([
        tool_call_reply("final_output", {"cuisine": "thai", "spice_level": "none", "servings": 2}, "bad"),
        tool_call_reply("final_output", {"cuisine": "italian", "spice_level": "none", "servings": 2}, "good"),
    ])
    action = await _agent(ScriptedBackend(ctl), tmp_path).act(API_TASK, small_history())
    assert action.params == {"cuisine": "italian", "spice_level": "none", "servings": 2}
    err = _tool_results(ctl.controller_calls[1][0])[0]["content"]
    assert err.startswith("error: final_output arguments do not match the API schema") and "cuisine" in err
    final_tool = next(t for t in ctl.controller_calls[0][1]["tools"] if t.name == "final_output")
    assert final_tool.parameters["properties"]["cuisine"]["enum"] == ["sichuan", "japanese", "italian"]
    assert final_tool.parameters["properties"]["servings"]["enum"] == list(range(1, 11))  # grammar-enforceable


async def test_never_valid_final_is_an_error(tmp_path):
    bad = tool_call_reply("final_output", {"cuisine": "thai"}, "bad")
    ctl = Controller([bad] * 5, on_forced_final=bad)
    with pytest.raises(AgentError, match="no valid final_output call within 2 steps"):
        await _agent(ScriptedBackend(ctl), tmp_path, max_steps="2").act(API_TASK, small_history())
    assert len(ctl.controller_calls) == 3


async def test_unknown_tool_is_fed_back(tmp_path):
    ctl = Controller([tool_call_reply("delete_history", {}, "x"), tool_call_reply("final_output", {}, "f")])
    await _agent(ScriptedBackend(ctl), tmp_path).act(TEXT_TASK, small_history())
    assert "unknown tool 'delete_history'" in _tool_results(ctl.controller_calls[1][0])[0]["content"]


async def test_code_errors_abort(tmp_path, monkeypatch):
    async def broken(self, *a, **k):
        raise ZeroDivisionError("bug in a tool")

    monkeypatch.setattr(DeepRetrieval, "search", broken)  # the search_history tool is this stage
    ctl = Controller([tool_call_reply("search_history", {"query": "docs"}), tool_call_reply("final_output", {})])
    with pytest.raises(ZeroDivisionError):
        await _agent(ScriptedBackend(ctl), tmp_path).act(TEXT_TASK, small_history())
    assert len(ctl.controller_calls) == 1


def test_tool_results_are_json_safe():
    assert json.dumps({"ok": True})


async def test_plan_alignment_with_align_slots_decides_and_enforces_the_params(tmp_path):
    ctl = Controller([
        tool_call_reply("rerank_evidence", {}, "c1"),
        tool_call_reply("plan_alignment", {}, "c2"),
        # the controller writes japanese; the slot step decided italian, and the decision stands
        tool_call_reply("final_output", {"cuisine": "japanese", "spice_level": "hot", "servings": 2}, "c3"),
    ])
    action = await _agent(ScriptedBackend(ctl), tmp_path, expansion="template", reranker="rules", align="slots").act(
        API_TASK, small_history())
    steps = [s.step for s in action.trace]
    assert steps.count("align_slot") == 2 and "align_plan" not in steps
    assert action.params == {"cuisine": "italian", "spice_level": "none", "servings": 2}
    plan_result = _tool_results(ctl.controller_calls[2][0])[-1]["content"]
    assert "Set cuisine = italian" in plan_result and "Set spice_level = none" in plan_result


@pytest.mark.parametrize("opts", [{"btda": "false"}, {"retrieval": "false"}, {"synthesis": "rag", "btda": "true"}, {"preset": "cheap"}])
def test_pipeline_switches_are_rejected_by_name(tmp_path, opts):
    with pytest.raises(ValueError, match="would change nothing: iba-fc's controller") as e:
        _agent(ScriptedBackend(["x"]), tmp_path, **opts)
    assert all(k in str(e.value) for k in opts)


async def test_expand_queries_runs_the_feedback_search_unless_switched_off(tmp_path):
    for feedback, want in (("true", True), ("false", False)):
        ctl = Controller([tool_call_reply("expand_queries", {}), tool_call_reply("final_output", {"notes": ""})])
        action = await _agent(ScriptedBackend(ctl), tmp_path, feedback=feedback).act(TEXT_TASK, small_history())
        assert ("feedback_retrieve" in [s.step for s in action.trace]) is want


def test_previews_mark_the_cut():
    from iba.agents.iba_fc import PREVIEW_CHARS, _preview
    from iba.retrieval.passage import Passage
    from iba.retrieval.views import CUT

    long = Passage(chunk_id="c1", text="word " * 100, turn_ids=["t"], timestamps=["x"], score=1.0)
    short = Passage(chunk_id="c2", text="a short one", turn_ids=["t"], timestamps=["x"], score=1.0)
    lines = _preview([long, short]).splitlines()
    assert lines[0].endswith(" " + CUT) and len(lines[0]) <= len("[c1] ") + PREVIEW_CHARS + 2
    assert lines[1] == "[c2] a short one"
