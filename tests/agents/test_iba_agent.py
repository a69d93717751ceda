import re

import pytest

from iba.agents.base import parse_options
from iba.agents.iba_agent import IBAAgent
from iba.agents.iba_options import IBAOptions
from iba.agents.toolkit import Toolkit
from iba.agents.trace import Trace
from iba.agents.preferences import resolve_latest
from iba.agents.replies import Preference
from iba.llm.structured import StructuredOutputError
from tests.agents.helpers import API_TASK, TEXT_TASK, env, iba_backend, iba_reply, small_history
from tests.fakes import ScriptedBackend

FULL = [
    "build_index", "similarity_retrieve", "expand_queries", "facet_retrieve", "cue_scan", "feedback_retrieve", "filter_redundant",
    "rerank_salience", "compact_evidence", "extract_preferences", "align_plan", "synthesize",
]
LLM_STEPS = {"expand_queries", "rerank_salience", "compact_evidence", "extract_preferences", "align_plan", "synthesize"}


def _agent(backend, tmp_path, **opts):
    windows = {} if opts.get("unit") in ("turn", "session") else {"size": "64", "overlap": "10"}
    return IBAAgent(env(backend, tmp_path), **windows, **opts)


async def test_full_pipeline_trace_has_every_step(tmp_path):
    backend = iba_backend()
    action = await _agent(backend, tmp_path).act(TEXT_TASK, small_history())
    assert action.kind == "generate" and "runnable" in action.text
    assert [s.step for s in action.trace] == FULL
    for s in action.trace:
        assert s.error is None and s.latency_s >= 0 and s.outputs is not None, s.step
        if s.step in LLM_STEPS:
            assert s.llm_calls == 1 and s.prompt.startswith("agent_") and s.prompt_hash and s.prompt_tokens > 0, s.step
        else:
            assert s.llm_calls == 0 and s.prompt is None, s.step
    assert len(backend.calls) == 6  # the budget: at most 6 LLM calls per instance
    by = {s.step: s for s in action.trace}
    # salience: the scripted first passage scores 10, the others 4 + 1 = 5 -> all retained (>= 5), <= 10
    retained = by["rerank_salience"].outputs["retained"]
    assert 1 <= len(retained) <= 10 and retained[0]["score"] == 10.0
    # latest wins: the 2025 correction replaces the 2024 value of the same aspect (case/space-insensitive)
    resolved = by["extract_preferences"].outputs["resolved"]
    assert [p["value"] for p in resolved["current"] if p["aspect"].lower().startswith("code")] == ["complete runnable code"]
    assert [p["value"] for p in resolved["superseded"]] == ["fragments"]
    # the plan reaches the synthesis prompt
    final_prompt = backend.calls[-1][0][-1]["content"]
    assert "full runnable code examples" in final_prompt and "complete runnable code" in final_prompt


async def test_call_api_params_are_schema_valid(tmp_path):
    backend = iba_backend()
    action = await _agent(backend, tmp_path).act(API_TASK, small_history())
    assert action.kind == "call_api" and action.params == {"cuisine": "japanese", "spice_level": "none", "servings": 2}
    assert backend.calls[-1][1]["json_schema"]["properties"]["spice_level"]["enum"] == ["none", "mild", "hot"]
    assert "Set spice_level = none" in backend.calls[-1][0][-1]["content"]


async def test_out_of_enum_params_retried_then_errored(tmp_path):
    backend = iba_backend(params={"cuisine": "thai", "spice_level": "none", "servings": 2})
    with pytest.raises(StructuredOutputError, match="cuisine"):
        await _agent(backend, tmp_path).act(API_TASK, small_history())
    assert len(backend.calls) == 7  # 5 steps + synthesis tried twice


async def test_bad_salience_json_retried_once_then_errored(tmp_path):
    def reply(m, k):
        if "rate passages" in m[0]["content"]:
            return {"scores": [{"relevance": 9, "signal": 0}]}  # out of range and wrong length
        return iba_reply(m, k)

    backend = ScriptedBackend(reply)
    with pytest.raises(StructuredOutputError) as info:
        await _agent(backend, tmp_path).act(TEXT_TASK, small_history())
    assert sum("rate passages" in m[0]["content"] for m, _ in backend.calls) == 2
    assert info.value.iba_trace[-1].step == "rerank_salience" and info.value.iba_trace[-1].llm_calls == 2


@pytest.mark.parametrize(
    "opts, steps, calls",
    [
        ({"retrieval": "false"}, ["build_index", "similarity_retrieve", "compact_evidence", "extract_preferences", "align_plan", "synthesize"], 4),
        ({"btda": "false"}, FULL[:8] + ["synthesize"], 3),
        ({"synthesis": "rag"}, FULL, 6),
        ({"expansion": "template", "reranker": "rules", "compact": "none"}, [s for s in FULL if s != "compact_evidence"], 3),
    ],
)
async def test_ablations(tmp_path, opts, steps, calls):
    backend = iba_backend()
    action = await _agent(backend, tmp_path, **opts).act(TEXT_TASK, small_history())
    assert [s.step for s in action.trace] == steps
    assert len(backend.calls) == calls
    if opts.get("retrieval") == "false":
        assert len(action.trace[1].outputs) == 3  # plain top-3 dense
    if opts.get("btda") == "false":
        assert "What the user said in past conversations" in backend.calls[-1][0][-1]["content"]
    if opts.get("compact") == "none":  # the extractor reads whole turns, not rule-compacted fragments
        extract = next(m for m, _ in backend.calls if "extract a user's preferences" in m[0]["content"])[-1]["content"]
        assert "Actually, rewrite it with full code examples I can run, the fragments never work!" in extract
    if opts.get("synthesis") == "rag":
        assert action.trace[-1].prompt == "agent_rag" and "Notes on the user" in backend.calls[-1][0][-1]["content"]


async def test_rule_reranker_prefers_explicit_feedback(tmp_path):
    backend = iba_backend()
    action = await _agent(backend, tmp_path, unit="turn", expansion="template", reranker="rules").act(TEXT_TASK, small_history())
    by = {s.step: s for s in action.trace}
    retained = by["rerank_salience"].outputs["retained"]
    assert len(retained) <= 10 and all(r["score"] >= 5 for r in retained)


def test_resolve_latest_is_order_independent_for_dates():
    a = Preference(aspect="tone", value="formal", kind="asked_for", date="2025-03-01")
    b = Preference(aspect="Tone", value="casual", kind="recently_updated", date="2025-01-01")
    r = resolve_latest([a, b])
    assert [p["value"] for p in r.current] == ["formal"] and [p["value"] for p in r.superseded] == ["casual"]
    assert resolve_latest([b, a]).current == r.current


def test_bad_option_value_is_rejected(tmp_path):
    with pytest.raises(ValueError, match="reranker"):
        _agent(iba_backend(), tmp_path, reranker="magic")


async def test_llm_scorer_that_keeps_nothing_falls_back_to_rules(tmp_path):
    def reply(m, k):
        if "rate passages" in m[0]["content"]:
            n = sum(1 for line in m[-1]["content"].splitlines() if line.startswith("[P"))
            return {"scores": [{"relevance": 0, "signal": 0}] * n}
        return iba_reply(m, k)

    action = await _agent(ScriptedBackend(reply), tmp_path).act(TEXT_TASK, small_history())
    step = next(s for s in action.trace if s.step == "rerank_salience")
    assert step.outputs["fallback"] == "rules" and step.outputs["retained"]
    assert all(v >= 5 for k, v in step.outputs["scores"].items() if k in {r["chunk_id"] for r in step.outputs["retained"]})


async def test_naive_salience_scores_each_candidate_in_its_own_call(tmp_path):
    backend = iba_backend()
    action = await _agent(backend, tmp_path, reranker="each", max_candidates="4").act(TEXT_TASK, small_history())
    step = {s.step: s for s in action.trace}["rerank_salience"]
    n = len(step.inputs["candidates"])
    assert 1 <= n <= 4 and step.llm_calls == n and len(backend.calls) == 5 + n
    salience = [m for m, _ in backend.calls if "rate passages" in m[0]["content"]]
    assert len(salience) == n and all(m[-1]["content"].count("[P1]") == 1 and "[P2]" not in m[-1]["content"] for m in salience)
    # every candidate is "the first passage" of its own call: the scripted scorer gives each 10
    assert set(step.outputs["scores"].values()) == {10.0}


SLOTS = {"expansion": "template", "reranker": "rules", "align": "slots"}


async def test_align_slots_asks_one_constrained_question_per_choice_parameter(tmp_path):
    backend = iba_backend()
    action = await _agent(backend, tmp_path, **SLOTS).act(API_TASK, small_history())
    steps = [s.step for s in action.trace]
    assert steps[-3:] == ["align_slot", "align_slot", "synthesize"]  # cuisine and spice_level; servings is no choice
    assert "compact_evidence" not in steps and "extract_preferences" not in steps and len(backend.calls) == 3
    slot_calls = [(m, k) for m, k in backend.calls if "decide one setting" in m[0]["content"]]
    enums = [k["json_schema"]["properties"]["value"]["enum"] for _, k in slot_calls]
    assert enums == [["sichuan", "japanese", "italian", "unknown"], ["none", "mild", "hot", "unknown"]]
    # the user's own dated lines reach the question, oldest first; assistant lines do not
    prompt = slot_calls[0][0][-1]["content"]
    assert "I hate spicy food" in prompt and "Noted." not in prompt
    dates = [line[2:12] for line in prompt.splitlines() if line.startswith("- 20")]
    assert dates and dates == sorted(dates)
    # the decisions are enforced: synthesis wrote japanese, the slot step decided italian
    assert action.params == {"cuisine": "italian", "spice_level": "none", "servings": 2}
    assert "Set cuisine = italian" in backend.calls[-1][0][-1]["content"]


async def test_align_slots_leaves_unknown_parameters_to_synthesis(tmp_path):
    def reply(m, k):
        if "decide one setting" in m[0]["content"]:
            return {"value": "unknown"}
        return iba_reply(m, k)

    action = await _agent(ScriptedBackend(reply), tmp_path, **SLOTS).act(API_TASK, small_history())
    assert action.params == {"cuisine": "japanese", "spice_level": "none", "servings": 2}  # synthesis' own values
    assert [s.outputs["value"] for s in action.trace if s.step == "align_slot"] == ["unknown", "unknown"]


async def test_align_slots_reply_outside_the_values_is_the_agents_failure(tmp_path):
    def reply(m, k):
        if "decide one setting" in m[0]["content"]:
            return {"value": "thai"}
        return iba_reply(m, k)

    with pytest.raises(StructuredOutputError, match="value"):
        await _agent(ScriptedBackend(reply), tmp_path, **SLOTS).act(API_TASK, small_history())


async def test_align_slots_does_not_change_generate_tasks(tmp_path):
    backend = iba_backend()
    action = await _agent(backend, tmp_path, **SLOTS).act(TEXT_TASK, small_history())
    assert "align_plan" in [s.step for s in action.trace] and "align_slot" not in [s.step for s in action.trace]


def test_choice_parameters_are_enums_and_booleans():
    from iba.agents.alignment_tools import choice_params
    from iba.agents.replies import slot_reply_model

    schema = {"properties": {"a": {"type": "string", "enum": ["x", "y"]}, "b": {"type": "boolean", "description": "B."},
                             "c": {"type": "integer", "minimum": 1, "maximum": 3}, "d": {"type": "string"}}}
    assert choice_params(schema) == [("a", "", ("x", "y")), ("b", "B.", (True, False))]
    model = slot_reply_model((True, False))
    assert model.model_validate({"value": False}).value is False and model.model_validate({"value": "unknown"}).value == "unknown"
    with pytest.raises(ValueError):
        model.model_validate({"value": "maybe"})


async def test_align_slots_shows_each_parameter_its_evidence_whole(tmp_path):
    backend = iba_backend()
    action = await _agent(backend, tmp_path, **SLOTS).act(API_TASK, small_history())
    shown = {}
    for m, _ in backend.calls:
        if "decide one setting" in m[0]["content"]:
            param = re.search(r"parameter `(\w+)`", m[-1]["content"]).group(1)
            shown[param] = [line for line in m[-1]["content"].splitlines() if line.startswith("- 20")]
    assert set(shown) == {"cuisine", "spice_level"}
    assert any(line.endswith("I usually order japanese food, sushi is my go-to.") for line in shown["cuisine"])
    assert any(line.endswith("I hate spicy food, no chili at all please.") for line in shown["spice_level"])
    steps = [s for s in action.trace if s.step == "align_slot"]
    assert all(s.inputs["view"]["cut"] == [] and s.inputs["view"]["tokens"] > 0 for s in steps)


async def test_synthesis_sees_the_evidence_beside_the_plan(tmp_path):
    """BT+DA adds: the plan does not replace the evidence in the deciding prompt."""
    backend = iba_backend()
    action = await _agent(backend, tmp_path).act(TEXT_TASK, small_history())
    final = backend.calls[-1][0][-1]["content"]
    assert "Plan:" in final and "full runnable code examples" in final
    assert "Actually, rewrite it with full code examples I can run, the fragments never work!" in final
    synth = action.trace[-1]
    assert synth.step == "synthesize" and synth.prompt_text and "Plan:" in synth.prompt_text


async def test_the_budget_bounds_the_deciding_prompts(tmp_path):
    backend = iba_backend()
    history = small_history() + [t.model_copy(update={"id": f"{t.id}-x{i}", "text": t.text + f" (take {i})"})
                                 for i in range(30) for t in small_history()[16:24]]
    action = await _agent(backend, tmp_path, expansion="template", reranker="rules", compact="none", budget="600").act(TEXT_TASK, history)
    for s in action.trace:
        if s.step in ("extract_preferences", "synthesize"):
            assert backend.count_tokens(s.prompt_text) <= 600 + 10, s.step
            assert s.inputs["view"]["left_out"] > 0, s.step


async def _rule_scores(tmp_path, names, **opts):
    """passage text -> rule salience after Deep Retrieval over turn units."""
    o = parse_options(IBAOptions, {"unit": "turn", "expansion": "template", "reranker": "rules", **opts}, "iba")
    tools = Toolkit(env(iba_backend(), tmp_path, scenarios=names), o, TEXT_TASK, small_history(), Trace())
    await tools.deep_retrieve()
    step = next(s for s in tools.trace.steps if s.step == "rerank_salience")
    return {p.text: step.outputs["scores"][p.chunk_id] for p in tools.deep.pool.passages}


async def test_scenario_contrast_demotes_another_scenarios_preference(tmp_path):
    names = ("Technical documentation writing", "Food ordering", "Travel planning", "Email writing")
    plain = await _rule_scores(tmp_path, names)
    moved = await _rule_scores(tmp_path, names, contrast="true")
    assert plain.keys() == moved.keys() and plain != moved
    food = [t for t in plain if "spicy" in t]
    docs = [t for t in plain if "code examples" in t]
    assert food and docs
    assert all(moved[t] <= plain[t] for t in food) and any(moved[t] < plain[t] for t in food)
    assert all(moved[t] >= plain[t] for t in docs)


async def test_scenario_contrast_needs_three_scenarios(tmp_path):
    names = ("Technical documentation writing", "Food ordering")
    assert await _rule_scores(tmp_path, names, contrast="true") == await _rule_scores(tmp_path, names)


@pytest.mark.parametrize("opts, named", [
    ({"retrieval": "false", "k": "3", "scan": "false"}, "k, scan would change nothing: retrieval=false"),
    ({"btda": "false", "compact": "none"}, "compact would change nothing: btda=false"),
    ({"reranker": "rules", "max_candidates": "4"}, "max_candidates would change nothing"),
    ({"retrieval": "false", "states": "true"}, "states would change nothing: retrieval=false"),
    ({"unit": "turn", "size": "64"}, "size would change nothing: unit=turn"),
])
def test_options_that_would_change_nothing_are_rejected_by_name(opts, named):
    with pytest.raises(ValueError, match=re.escape(named)):
        parse_options(IBAOptions, opts, "iba")
    parse_options(IBAOptions, {k: v for k, v in opts.items() if k in ("retrieval", "btda", "reranker", "unit")}, "iba")


async def test_cheap_preset_is_one_call_over_the_evidence_view(tmp_path):
    backend = iba_backend()
    action = await _agent(backend, tmp_path, preset="cheap").act(TEXT_TASK, small_history())
    assert [s.step for s in action.trace] == FULL[:8] + ["synthesize"]
    assert len(backend.calls) == 1 and action.trace[-1].prompt == "agent_synthesize"
    assert "What the user said in past conversations" in backend.calls[0][0][-1]["content"]
    o = parse_options(IBAOptions, {"preset": "cheap"}, "iba")
    assert (o.expansion, o.reranker, o.btda, o.budget) == ("template", "rules", False, 1100)


def test_options_beside_a_preset_override_it_and_are_checked():
    assert parse_options(IBAOptions, {"preset": "cheap", "budget": "2000"}, "iba").budget == 2000
    # the preset's own options are not the user's word: nothing it set is named as idle
    assert parse_options(IBAOptions, {"preset": "cheap", "retrieval": "false"}, "iba").retrieval is False
    with pytest.raises(ValueError, match=re.escape("compact would change nothing: btda=false")):
        parse_options(IBAOptions, {"preset": "cheap", "compact": "none"}, "iba")
    with pytest.raises(ValueError, match="option preset=lavish"):
        parse_options(IBAOptions, {"preset": "lavish"}, "iba")
