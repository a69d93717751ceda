"""The LLM variant of query expansion: Table 3's five facet sub-queries in one JSON call.

Here rather than in iba.agents because `iba eval-retrieval --expansion llm` uses it too; the
deterministic variant is `template_queries` in iba.retrieval.expansion.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from iba.llm.base import Backend, Completion
from iba.llm.structured import Reply, complete_json
from iba.prompts import render
from iba.retrieval.expansion import FACETS, FacetQueries, schema_terms
from iba.types import TaskView

# reply cap in tokens, from the reply model's bounds at a pessimistic 2.5 characters per token:
# a grammar-constrained reply always fits, so none is cut off
EXPANSION_TOKENS = 480

Query = Annotated[str, Field(min_length=3, max_length=200)]


class FacetQueriesReply(Reply):
    """The LLM's facet queries (bounded for decoding); converted to retrieval's FacetQueries."""

    style: Query
    structure: Query
    decision: Query
    correction: Query
    habit: Query


async def llm_facet_queries(
    backend: Backend, task: TaskView, seed: int, max_tokens: int = EXPANSION_TOKENS
) -> tuple[FacetQueries, list[Completion]]:
    """Table 3's five facet sub-queries from the LLM, in one JSON call."""
    prompt = render("agent_query_expansion", task=task, options=schema_terms(task.api_schema))
    reply, comps = await complete_json(backend, prompt.messages, FacetQueriesReply, max_tokens=max_tokens, seed=seed)
    return FacetQueries(**reply.model_dump(include=set(FACETS))), comps
