"""The LLM variant of query expansion: Table 3's five facet sub-queries in one JSON call, and (an
option, `states=true`) the state queries in a second one.

Here rather than in iba.agents because `iba eval-retrieval --expansion llm` uses it too; the
deterministic variant is `template_queries` in iba.retrieval.expansion.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from iba.llm.base import Backend, Completion
from iba.llm.structured import Reply, complete_json
from iba.prompts import Prompt, render
from iba.retrieval.expansion import FACETS, FacetQueries, schema_terms
from iba.types import TaskView

# reply cap in tokens, from the reply model's bounds at a pessimistic 2.5 characters per token:
# a grammar-constrained reply always fits, so none is cut off
EXPANSION_TOKENS = 480
# state queries (`states=true`): at most 6 of at most 200 characters at 1.5 characters per token, plus
# the JSON: 2.5 was too few (a 0.5B reply of six long questions was cut at 520 tokens on PrefEval)
STATE_TOKENS = 840

Query = Annotated[str, Field(min_length=3, max_length=200)]


class FacetQueriesReply(Reply):
    """The LLM's facet queries (bounded for decoding); converted to retrieval's FacetQueries."""

    style: Query
    structure: Query
    decision: Query
    correction: Query
    habit: Query


class StateQueriesReply(Reply):
    """The LLM's state queries: circumstances of the person, said as they would have said them."""

    states: list[Query] = Field(min_length=1, max_length=6)


async def llm_facet_queries(
    backend: Backend, task: TaskView, seed: int, max_tokens: int = EXPANSION_TOKENS
) -> tuple[FacetQueries, list[Completion]]:
    """Table 3's five facet sub-queries from the LLM, in one JSON call."""
    prompt = render("agent_query_expansion", task=task, options=schema_terms(task.api_schema))
    reply, comps = await complete_json(backend, prompt.messages, FacetQueriesReply, max_tokens=max_tokens, seed=seed)
    return FacetQueries(**reply.model_dump(include=set(FACETS))), comps


def state_prompt(task: TaskView) -> Prompt:
    return render("agent_state_queries", task=task, options=schema_terms(task.api_schema))


async def llm_state_queries(backend: Backend, task: TaskView, seed: int, max_tokens: int = STATE_TOKENS) -> tuple[list[str], list[Completion]]:
    """First-person sentences about the person's circumstances (health, schedule, possessions, people,
    recent events) that would bear on what the task decides, in one JSON call.

    The evidence of a transient state or an oblique preference shares no word with the task, its
    parameters or their values ("finals start Monday" behind a weekly plan), so no query written from
    the task's words finds it by similarity; a sentence in the person's own register about what the
    task implies of them can. Duplicates (case and spacing aside) are dropped."""
    reply, comps = await complete_json(backend, state_prompt(task).messages, StateQueriesReply, max_tokens=max_tokens, seed=seed)
    seen: dict[str, str] = {}
    for q in reply.states:
        seen.setdefault(" ".join(q.lower().split()), q.strip())
    return list(seen.values()), comps
