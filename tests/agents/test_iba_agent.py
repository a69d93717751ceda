import pytest

from iba.agents.iba_agent import IBAAgent
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
    return IBAAgent(env(backend, tmp_path), size="64", overlap="10", **opts)


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
        ({"expansion": "template", "reranker": "rules", "compact": "rules"}, FULL, 3),
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
        assert "Evidence from past conversations" in backend.calls[-1][0][-1]["content"]
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
