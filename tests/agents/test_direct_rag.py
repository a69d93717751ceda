import pytest

from iba.agents.base import AgentError
from iba.agents.direct import DirectAgent, fit_history
from iba.agents.rag import RagAgent
from iba.llm.structured import StructuredOutputError
from iba.retrieval.chunking import turn_line
from tests.agents.helpers import API_TASK, TEXT_TASK, env, small_history
from tests.fakes import ScriptedBackend


def test_fit_history_keeps_most_recent_in_order():
    lines = [f"line {i}" for i in range(10)]
    assert fit_history(lines, 9, lambda s: 2) == ["line 7", "line 8", "line 9"]
    assert fit_history(lines, 0, lambda s: 2) == []


async def test_direct_truncates_to_the_context_window(tmp_path):
    backend = ScriptedBackend(["A concise doc."])
    backend.context_window = 1200  # tiny window: only the recent turns fit
    history = small_history()
    action = await DirectAgent(env(backend, tmp_path)).act(TEXT_TASK, history)
    assert action.kind == "generate" and action.text == "A concise doc."
    assert [s.step for s in action.trace] == ["truncate_history", "answer"]
    kept = action.trace[0].outputs["kept_turns"]
    assert 0 < kept < len(history) and action.trace[0].outputs["dropped_turns"] == len(history) - kept
    prompt = backend.calls[0][0][-1]["content"]
    assert turn_line(history[-1]) in prompt and turn_line(history[0]) not in prompt
    assert sum(backend.count_tokens(m["content"]) for m in backend.calls[0][0]) <= 1200 - 768


async def test_direct_call_api_uses_the_schema(tmp_path):
    backend = ScriptedBackend([{"cuisine": "japanese", "spice_level": "none", "servings": 2}])
    action = await DirectAgent(env(backend, tmp_path)).act(API_TASK, small_history())
    assert action.kind == "call_api" and action.api_name == "order_food"
    assert action.params == {"cuisine": "japanese", "spice_level": "none", "servings": 2}
    assert backend.calls[0][1]["json_schema"]["properties"]["cuisine"]["enum"] == ["sichuan", "japanese", "italian"]


async def test_invalid_json_is_retried_once_with_the_error_then_errored(tmp_path):
    backend = ScriptedBackend(["not json at all", {"cuisine": "thai", "spice_level": "none", "servings": 2}])
    with pytest.raises(StructuredOutputError) as info:
        await DirectAgent(env(backend, tmp_path)).act(API_TASK, small_history())
    assert len(backend.calls) == 2
    retry = backend.calls[1][0][-1]["content"]
    assert "not valid" in retry  # the error goes back to the model
    steps = info.value.iba_trace
    assert steps[-1].step == "answer" and steps[-1].llm_calls == 2 and "StructuredOutputError" in steps[-1].error


async def test_invalid_json_then_valid_recovers(tmp_path):
    backend = ScriptedBackend(["{oops", {"cuisine": "italian", "spice_level": "mild", "servings": 2}])
    action = await DirectAgent(env(backend, tmp_path)).act(API_TASK, small_history())
    assert action.params["cuisine"] == "italian" and action.trace[-1].llm_calls == 2


async def test_empty_text_is_an_error_not_an_answer(tmp_path):
    with pytest.raises(AgentError, match="empty"):
        await DirectAgent(env(ScriptedBackend(["   "]), tmp_path)).act(TEXT_TASK, small_history())


def test_unknown_option_is_rejected(tmp_path):
    with pytest.raises(ValueError, match=r"agent direct: unknown option 'colour' \(allowed: max_tokens, "):
        DirectAgent(env(ScriptedBackend([]), tmp_path), colour="blue")
    with pytest.raises(ValueError, match=r"agent direct: unknown option 'order'"):  # it was parsed and never read
        DirectAgent(env(ScriptedBackend([]), tmp_path), order="recent")


async def test_rag_puts_top3_passages_before_the_task(tmp_path):
    backend = ScriptedBackend(["Docs with runnable code."])
    action = await RagAgent(env(backend, tmp_path), size="64", overlap="10").act(TEXT_TASK, small_history())
    assert [s.step for s in action.trace] == ["build_index", "similarity_retrieve", "answer"]
    hits = action.trace[1].outputs
    assert len(hits) == 3 and all(h["turn_ids"] for h in hits)
    prompt = backend.calls[0][0][-1]["content"]
    assert prompt.count("--- passage") == 3 and prompt.rstrip().endswith(TEXT_TASK.query)
    assert action.trace[-1].prompt == "agent_rag" and action.trace[-1].llm_calls == 1


async def test_rag_default_is_the_papers_256_50_chunks(tmp_path):
    backend = ScriptedBackend(["ok"])
    action = await RagAgent(env(backend, tmp_path)).act(TEXT_TASK, small_history())
    assert action.trace[0].inputs.items() >= {"size": 256, "overlap": 50, "unit": "token"}.items()


async def test_rag_marks_cut_turns_and_a_budget_picks_the_passages_that_fit(tmp_path):
    from iba.retrieval.views import CUT

    history = small_history()
    backend = ScriptedBackend(lambda m, k: "ok")
    await RagAgent(env(backend, tmp_path), size="40", overlap="5").act(TEXT_TASK, history)
    prompt = backend.calls[0][0][-1]["content"]
    whole = {" ".join(t.text.split()) for t in history}
    bodies = [line.split("] ", 1)[1] for line in prompt.splitlines() if line.startswith("[20") and "] " in line]
    assert bodies and all(b in whole or CUT in b for b in bodies)
    for budget in (600, 1500):
        b = ScriptedBackend(lambda m, k: "ok")
        action = await RagAgent(env(b, tmp_path), size="40", overlap="5", budget=str(budget)).act(TEXT_TASK, history)
        assert sum(b.count_tokens(m["content"]) for m in b.calls[0][0]) <= budget
        shown = len(next(s for s in action.trace if s.step == "similarity_retrieve").outputs)
        assert shown == b.calls[0][0][-1]["content"].count("--- passage ")
    with pytest.raises(ValueError, match="k would change nothing: budget decides"):
        RagAgent(env(backend, tmp_path), k="5", budget="1000")
