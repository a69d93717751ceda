"""Chained IBA steps (`chain=true`): each LLM step after retrieval continues the previous one's conversation."""

from __future__ import annotations

from iba.agents.iba_agent import IBAAgent
from iba.agents.step_prompts import StepPrompts
from iba.prompts import render
from tests.agents.helpers import API_TASK, TEXT_TASK, env, iba_backend, small_history

CHAINED = ["agent_salience", "agent_compact", "agent_extract", "agent_align", "agent_synthesize"]


def _agent(backend, tmp_path, **opts):
    return IBAAgent(env(backend, tmp_path), size="64", overlap="10", **opts)


async def test_each_step_extends_the_previous_prompt(tmp_path):
    backend = iba_backend()
    action = await _agent(backend, tmp_path, chain="true").act(API_TASK, small_history())
    assert action.params == {"cuisine": "japanese", "spice_level": "none", "servings": 2}
    calls = [m for m, _ in backend.calls][1:]  # after query expansion, which stays on its own
    assert len(calls) == 5
    for before, after in zip(calls, calls[1:]):
        assert after[: len(before)] == before  # the whole previous prompt is the prefix of the next
        assert after[len(before)]["role"] == "assistant" and after[-1]["role"] == "user"
    by = {s.step: s for s in action.trace}
    assert [by[s].prompt for s in ("rerank_salience", "compact_evidence", "extract_preferences", "align_plan",
                                   "synthesize")] == CHAINED
    # compact names the passages the salience turn already shows instead of sending them again
    compact_turn = calls[1][-1]["content"]
    kept = by["rerank_salience"].outputs["retained"]
    shown = [p for p in by["rerank_salience"].inputs["candidates"]]
    assert compact_turn.startswith("Next step: condense") and "[P1]" not in compact_turn
    assert "passages P1" in compact_turn and sum(k["chunk_id"] in shown for k in kept) >= 1
    assert "Set spice_level = none" in calls[-1][-1]["content"]


async def test_chain_off_keeps_one_prompt_per_step(tmp_path):
    backend = iba_backend()
    await _agent(backend, tmp_path).act(TEXT_TASK, small_history())
    assert all(len(m) == 2 and m[0]["role"] == "system" for m, _ in backend.calls)


class _Counting:
    """count_tokens only: StepPrompts asks nothing else of its backend."""

    def __init__(self, window: int) -> None:
        self.context_window = window

    def count_tokens(self, text: str) -> int:
        return len(text.split())


def test_a_conversation_that_would_overflow_starts_again():
    evidence = [f"2025-01-0{i} | I always want the {i}th option" for i in range(1, 8)]
    first = render("agent_extract", task=TEXT_TASK, evidence=evidence)
    words = sum(len(m["content"].split()) for m in first.messages)
    steps = StepPrompts(_Counting(window=words + 200), chain=True)
    p1 = steps.prompt("agent_extract", 50, task=TEXT_TASK, evidence=evidence)
    assert p1.messages == first.messages
    steps.answered(p1, '{"preferences": []}')
    p2 = steps.prompt("agent_align", 50, task=TEXT_TASK, preferences=["tone: plain"], options="")
    assert len(p2.messages) == 4 and p2.messages[:2] == first.messages  # fits: continues
    steps.answered(p2, '{"style": []}')
    p3 = steps.prompt("agent_align", 150, task=TEXT_TASK, preferences=["tone: plain"], options="")
    assert p3.messages == render("agent_align", task=TEXT_TASK, preferences=["tone: plain"], options="").messages
    assert p3.hash == p2.hash


def test_every_chained_template_has_a_followup():
    for name in CHAINED:
        assert render(name, followup=True, task=API_TASK, passages=["[2025-01-01 user] hi"], n=1, refs=["P1"], extra=[],
                      evidence=["2025-01-01 | hi"], preferences=["tone: plain"], options="x", plan=["Set a = b"],
                      schema="{}", instructions="").messages[0]["role"] == "user"
