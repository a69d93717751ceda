"""The state queries (`states=true`): one JSON call, duplicates dropped, and a prompt that carries no
phrase of the builder's (the rule the cue lexicon keeps: the retriever is not tuned to the builder)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from iba.prompts import render
from iba.retrieval.llm_expansion import StateQueriesReply, llm_state_queries, state_prompt
from tests.agents.helpers import API_TASK
from tests.fakes import ScriptedBackend

CONSTRUCT = Path(__file__).resolve().parents[2] / "src" / "iba" / "construct"
PROMPT = Path(__file__).resolve().parents[2] / "src" / "iba" / "prompts" / "agent_state_queries.jinja"
N = 4  # words: a shared 4-word run is a phrase, not a common word


def _grams(text: str) -> set[tuple[str, ...]]:
    words = re.findall(r"[a-z']+", text.lower())
    return {tuple(words[i:i + N]) for i in range(len(words) - N + 1)}


def _builder_text() -> str:
    """Every string the builder writes from: its modules' string literals and its data files."""
    parts = []
    for path in CONSTRUCT.rglob("*.py"):
        parts += [n.value for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    parts += [p.read_text() for p in (CONSTRUCT / "data").rglob("*") if p.is_file()]
    return "\n".join(parts)


def test_the_state_prompt_shares_no_phrase_with_the_builder():
    prompt = re.sub(r"\{#.*?#\}", "", PROMPT.read_text(), flags=re.S)
    builder = _grams(_builder_text())
    assert len(builder) > 10_000  # the builder's wording was found
    shared = _grams(prompt) & builder
    assert not shared, sorted(shared)[:10]


def test_the_state_prompt_shows_the_task_and_its_parameters():
    text = "\n".join(m["content"] for m in state_prompt(API_TASK).messages)
    assert API_TASK.query in text and "spice level" in text and "first person" in text


async def test_state_queries_one_call_duplicates_dropped():
    backend = ScriptedBackend([{"states": ["I had a tooth out on Monday.", "i had a  tooth out on monday.", "My sister visits this week."]}])
    states, comps = await llm_state_queries(backend, API_TASK, seed=1)
    assert states == ["I had a tooth out on Monday.", "My sister visits this week."] and len(comps) == 1
    assert set(backend.calls[0][1]["json_schema"]["properties"]) == set(StateQueriesReply.model_fields) == {"states"}
    assert render("agent_state_queries", task=API_TASK, options="").hash == state_prompt(API_TASK).hash
