"""Query expansion into the five preference facets of the paper's Table 3.

Q(x) = {q_style, q_structure, q_decision, q_correction, q_habit}. The LLM writes them in one JSON
call (iba.retrieval.llm_expansion); `template_queries` is the deterministic, free alternative
(offline/cheap runs, eval-retrieval default). Both only read the public TaskView: query, scenario
name and, for API tasks, the API schema's parameter names, descriptions and enum values.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from iba.types import Strict, TaskView

FACETS: tuple[str, ...] = ("style", "structure", "decision", "correction", "habit")


class FacetQueries(Strict):
    """One retrieval query per preference facet (Table 3)."""

    style: str = Field(min_length=3, description="tone, wording, formality, length the user likes")
    structure: str = Field(min_length=3, description="format, layout, ordering, sections the user wants")
    decision: str = Field(min_length=3, description="options or trade-offs the user chose before")
    correction: str = Field(min_length=3, description="what the user corrected, rejected or changed their mind on")
    habit: str = Field(min_length=3, description="what the user does repeatedly or usually")
    # not a facet: the LLM's sentences about the person's circumstances (`states=true`; none from templates)
    # (left out of dumps when empty, so prompts and traces without it read as before)
    states: list[str] = Field(default_factory=list, exclude_if=lambda v: not v)

    def items(self) -> list[tuple[str, str]]:
        return [(f, getattr(self, f)) for f in FACETS]


def schema_terms(api_schema: dict[str, Any] | None) -> str:
    """Parameter names, descriptions and enum values of an API schema, as query words."""
    if not api_schema:
        return ""
    parts = []
    for name, prop in (api_schema.get("properties") or {}).items():
        words = [name.replace("_", " "), prop.get("description", "")]
        if prop.get("enum"):
            words.append(" ".join(str(v) for v in prop["enum"]))
        parts.append(" ".join(w for w in words if w))
    return "; ".join(parts)


def template_queries(task: TaskView) -> FacetQueries:
    """Deterministic facet queries built from the task's public fields."""
    topic = task.scenario_name.lower()
    options = schema_terms(task.api_schema)
    decision_tail = f" Options: {options}." if options else ""
    return FacetQueries(
        style=f"How I like {topic} to sound: tone, wording, formality and length I prefer. {task.query}",
        structure=f"How I want {topic} organised: format, layout, sections, order and level of detail.",
        decision=f"What I chose or picked for {topic} before, my choices and trade-offs.{decision_tail}",
        correction=(
            f"I corrected or complained about {topic}: actually, no, instead, I changed my mind, "
            "not anymore, I don't like that, please change it."
        ),
        habit=f"What I usually or always do for {topic}, as usual, every time, my routine and repeated choices.",
    )
