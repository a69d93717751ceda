"""The Broad Thinking & Deep Alignment tools of the IBA-Agent: compact, extract, align."""

from __future__ import annotations

from iba.agents.passage_views import rule_compact, user_view
from iba.agents.preferences import ResolvedPreferences, preference_lines, resolve_latest
from iba.agents.replies import (
    ALIGN_TOKENS,
    COMPACT_TOKENS,
    EXTRACT_TOKENS,
    AlignmentPlan,
    CompactEvidence,
    ExtractedPreferences,
)
from iba.agents.tool_state import ToolState
from iba.llm.structured import complete_json
from iba.retrieval.expansion import schema_terms


class AlignmentTools(ToolState):
    async def compact_evidence(self) -> CompactEvidence:
        """The informative moments of the retained passages, dated (LLM; or the user's cue lines)."""
        passages = self.evidence
        with self.trace.step("compact_evidence", {"passages": [p.chunk_id for p in passages], "mode": self.o.compact}) as step:
            if not passages:
                self.compacted = CompactEvidence(items=[])
            elif self.o.compact == "rules":
                self.compacted = rule_compact(passages)
            else:
                cap = self._cap(COMPACT_TOKENS)
                shown = self.shown if self.prompts.open else {}
                prompt = self.prompts.prompt(
                    "agent_compact", cap, task=self.task, passages=[p.text for p in passages],
                    refs=[shown[p.chunk_id] for p in passages if p.chunk_id in shown],
                    extra=[user_view(p) for p in passages if p.chunk_id not in shown],
                )
                step.llm(prompt, [])
                self.compacted, comps = await complete_json(
                    self.backend, prompt.messages, CompactEvidence, max_tokens=cap, seed=self.env.seed
                )
                step.llm(None, comps)
                self.prompts.answered(prompt, comps[-1].text)
            step.outputs = self.compacted
        return self.compacted

    async def extract_preferences(self) -> ResolvedPreferences:
        """Asked for / corrected / rejected / repeatedly chose / recently updated, then latest wins."""
        compacted = self.compacted or await self.compact_evidence()
        evidence = [f"{i.date or 'undated'} | {i.quote}" for i in compacted.items]
        with self.trace.step("extract_preferences", {"evidence": evidence}) as step:
            if not evidence:
                extracted = ExtractedPreferences(preferences=[])
            else:
                cap = self._cap(EXTRACT_TOKENS)
                prompt = self.prompts.prompt("agent_extract", cap, task=self.task, evidence=evidence)
                step.llm(prompt, [])
                extracted, comps = await complete_json(
                    self.backend, prompt.messages, ExtractedPreferences, max_tokens=cap, seed=self.env.seed
                )
                step.llm(None, comps)
                self.prompts.answered(prompt, comps[-1].text)
            self.preferences = resolve_latest(extracted.preferences)
            step.outputs = {"extracted": extracted, "resolved": self.preferences}
        return self.preferences

    async def align_plan(self) -> AlignmentPlan:
        """Style/structure/constraints for text; a value per slot for API calls."""
        prefs = self.preferences or await self.extract_preferences()
        lines = preference_lines(prefs)
        options = schema_terms(self.task.api_schema)
        with self.trace.step("align_plan", {"preferences": lines}) as step:
            cap = self._cap(ALIGN_TOKENS)
            prompt = self.prompts.prompt("agent_align", cap, task=self.task, preferences=lines, options=options)
            step.llm(prompt, [])
            self.plan, comps = await complete_json(
                self.backend, prompt.messages, AlignmentPlan, max_tokens=cap, seed=self.env.seed
            )
            step.llm(None, comps)
            self.prompts.answered(prompt, comps[-1].text)
            step.outputs = self.plan
        return self.plan

    async def broad_thinking(self) -> AlignmentPlan:
        await self.compact_evidence()
        await self.extract_preferences()
        return await self.align_plan()
