"""The IBA-Agent tools (paper section 4), shared by the pipeline (`iba`) and the FC variant (`iba-fc`).

Deep Retrieval (retrieval_tools): build_index, similarity_retrieve, expand_queries, facet_retrieve,
cue_scan_retrieve, feedback_retrieve, filter_redundant, rerank_salience. Broad Thinking & Deep
Alignment (alignment_tools): compact_evidence, extract_preferences (the code then keeps the latest
value per aspect), align_plan. Synthesis (here): synthesize.

Each tool is a method of `Toolkit`, which holds one task's state (tool_state: candidate pool,
evidence, preferences, plan) and records every call as a TraceStep with typed inputs and outputs.
LLM steps use a template from iba/prompts (agent_*.jinja) and `complete_json` against a pydantic
reply model (replies).
"""

from __future__ import annotations

from typing import Any, Literal

from iba.agents.alignment_tools import AlignmentTools
from iba.agents.api_params import validate_params
from iba.agents.answer import PARAMS_MAX_TOKENS, TEXT_MAX_TOKENS, answer, schema_text
from iba.agents.preferences import preference_lines
from iba.agents.retrieval_tools import DeepRetrievalTools
from iba.prompts import render


class Toolkit(DeepRetrievalTools, AlignmentTools):
    """The tools over one (task, history), with their shared state and trace."""

    def enforce_slots(self, params: dict[str, Any]) -> dict[str, Any]:
        """The params with each slot that align_slots decided set to its decision (values from the
        schema's enum, so the params stay valid): the plan is the agent's decision, not a hint the
        synthesis step may drop."""
        decided = {s.param: s.value for s in (self.plan.slots if self.plan else [])}
        return validate_params(self.task.api_schema or {}, {**params, **decided})

    async def synthesize(self, mode: Literal["plan", "rag"] = "plan", instructions: str = "") -> dict[str, Any]:
        """The final text, or API params constrained to (and validated against) the schema."""
        schema = schema_text(self.task) if self.task.action == "call_api" else ""
        prefs = preference_lines(self.preferences) if self.preferences else []
        inputs = {"mode": mode, "plan": self.plan.lines() if self.plan else [], "preferences": prefs,
                  "passages": [p.chunk_id for p in self.evidence], "instructions": instructions}
        with self.trace.step("synthesize", inputs) as step:
            if mode == "rag":
                prompt = render("agent_rag", task=self.task, passages=[p.text for p in self.evidence], notes=prefs, schema=schema)
            else:
                # without BT+DA there is no plan: the raw evidence goes to synthesis instead
                raw = [p.text for p in self.evidence] if self.plan is None else []
                budget = self.o.max_tokens or (PARAMS_MAX_TOKENS if self.task.action == "call_api" else TEXT_MAX_TOKENS)
                prompt = self.prompts.prompt(
                    "agent_synthesize", budget, task=self.task, plan=self.plan.lines() if self.plan else [],
                    preferences=prefs, passages=raw, schema=schema, instructions=instructions,
                )
            result = await answer(self.backend, prompt, self.task, step, seed=self.env.seed, max_tokens=self.o.max_tokens)
            if self.o.align == "slots" and self.plan is not None and "params" in result:
                result = {"params": self.enforce_slots(result["params"])}
            step.outputs = result
        return result
