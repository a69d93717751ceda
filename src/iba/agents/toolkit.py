"""The IBA-Agent tools (paper section 4), shared by the pipeline (`iba`) and the FC variant (`iba-fc`).

Deep Retrieval (retrieval_tools): build_index, the stages of the one pipeline (`deep`, a
retrieval.deep.DeepRetrieval: search, widen, narrow), rerank_salience. Broad Thinking & Deep
Alignment (alignment_tools): compact_evidence, extract_preferences (the code then keeps the latest
value per aspect), align_plan. Synthesis (here): synthesize, which reads the plan *and* the evidence
view beside it (whole user turns within the prompt's budget), so a lossy plan cannot hide what
retrieval found.

Each tool is a method of `Toolkit`, which holds one task's state (tool_state: candidate pool,
evidence, preferences, plan) and records every call as a TraceStep with typed inputs and outputs.
LLM steps use a template from iba/prompts (agent_*.jinja) and `complete_json` against a pydantic
reply model (replies).
"""

from __future__ import annotations

from typing import Any, Literal

from iba.agents.alignment_tools import AlignmentTools, view_brief
from iba.agents.api_params import validate_params
from iba.agents.answer import PARAMS_MAX_TOKENS, TEXT_MAX_TOKENS, answer, schema_text
from iba.agents.preferences import preference_lines
from iba.agents.retrieval_tools import DeepRetrievalTools
from iba.prompts import Prompt, render
from iba.retrieval.views import View


class Toolkit(DeepRetrievalTools, AlignmentTools):
    """The tools over one (task, history), with their shared state and trace."""

    def enforce_slots(self, params: dict[str, Any]) -> dict[str, Any]:
        """The params with each slot that align_slots decided set to its decision (values from the
        schema's enum, so the params stay valid): the plan is the agent's decision, not a hint the
        synthesis step may drop."""
        decided = {s.param: s.value for s in (self.plan.slots if self.plan else [])}
        return validate_params(self.task.api_schema or {}, {**params, **decided})

    async def synthesis_prompt(self, mode: Literal["plan", "rag"] = "plan", instructions: str = "") -> tuple[Prompt, View]:
        """The final step's prompt: the plan and preferences (when BT+DA ran) with the evidence view
        filling the rest of the `budget`; `rag`: the view and the preferences as flat context."""
        schema = schema_text(self.task) if self.task.action == "call_api" else ""
        prefs = preference_lines(self.preferences) if self.preferences else []
        plan = self.plan.lines() if self.plan else []
        if mode == "rag":
            room = self.room("agent_rag", task=self.task, passages=[], notes=prefs, schema=schema)
            view = await self.view(room)
            return render("agent_rag", task=self.task, passages=["\n".join(view.lines)] if view.lines else [], notes=prefs, schema=schema), view
        variables = dict(task=self.task, plan=plan, preferences=prefs, schema=schema, instructions=instructions)
        view = await self.view(self.room("agent_synthesize", passages=[], **variables))
        budget = self.o.max_tokens or (PARAMS_MAX_TOKENS if self.task.action == "call_api" else TEXT_MAX_TOKENS)
        return self.prompts.prompt("agent_synthesize", budget, passages=view.lines, **variables), view

    async def synthesize(self, mode: Literal["plan", "rag"] = "plan", instructions: str = "") -> dict[str, Any]:
        """The final text, or API params constrained to (and validated against) the schema."""
        prefs = preference_lines(self.preferences) if self.preferences else []
        prompt, view = await self.synthesis_prompt(mode, instructions)
        inputs = {"mode": mode, "plan": self.plan.lines() if self.plan else [], "preferences": prefs,
                  "passages": [p.chunk_id for p in self.evidence], "instructions": instructions} | view_brief(view)
        with self.trace.step("synthesize", inputs) as step:
            result = await answer(self.backend, prompt, self.task, step, seed=self.env.seed, max_tokens=self.o.max_tokens)
            if self.o.align == "slots" and self.plan is not None and "params" in result:
                result = {"params": self.enforce_slots(result["params"])}
            step.outputs = result
        return result
