"""The Broad Thinking & Deep Alignment tools of the IBA-Agent: compact, extract, align; and, for
CallAPI tasks with `align=slots`, align_slots: one constrained choice per API parameter instead.

Why align_slots (ours, beyond the paper): with the 1.5B model the extract -> align chain named the
gold value for none of the slots whose evidence it had kept (bench/BENCHMARKS.md, session 7). A
small model answers a narrow question better than it writes a plan: one parameter, its allowed
values, and the user's dated lines from the kept passages that are nearest (dense) to that
parameter, so the few that bear on it are not lost among the rest.
"""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np

from iba.agents.passage_views import dated_user_lines, rule_compact, user_view
from iba.agents.preferences import ResolvedPreferences, preference_lines, resolve_latest
from iba.agents.replies import (
    ALIGN_TOKENS,
    COMPACT_TOKENS,
    EXTRACT_TOKENS,
    SLOT_TOKENS,
    UNKNOWN,
    AlignmentPlan,
    CompactEvidence,
    ExtractedPreferences,
    SlotChoice,
    slot_reply_model,
)
from iba.agents.tool_state import ToolState
from iba.llm.structured import complete_json
from iba.prompts import Prompt, render
from iba.retrieval.expansion import schema_terms
from iba.types import TaskView

SLOT_POOL_LINES = 60  # the user's lines of the kept passages that align_slots chooses from


def choice_params(api_schema: dict[str, Any] | None) -> list[tuple[str, str, tuple[Any, ...]]]:
    """(name, description, allowed values) of each parameter that is a choice: an enum or a boolean."""
    out = []
    for name, prop in ((api_schema or {}).get("properties") or {}).items():
        values = tuple(prop["enum"]) if prop.get("enum") else (True, False) if prop.get("type") == "boolean" else ()
        if values:
            out.append((name, prop.get("description") or "", values))
    return out


def param_query(task: TaskView, name: str, description: str, values: tuple[Any, ...]) -> str:
    """The text a parameter's nearest user lines are found with: scenario, name, description, values."""
    return f"{task.scenario_name}: {name.replace('_', ' ')}. {description} " + ", ".join(str(v).replace("_", " ") for v in values)


def slot_prompt(task: TaskView, evidence: list[str], name: str, description: str, values: tuple[Any, ...]) -> Prompt:
    """The align_slot question for one parameter over the given "date | text" lines."""
    shown = [str(v).lower() if isinstance(v, bool) else v for v in values]  # JSON spelling of booleans
    return render("agent_align_slot", task=task, evidence=evidence, param=name, description=description, values=shown)


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

    async def align_slots(self) -> AlignmentPlan:
        """A value per choice parameter of the API (or none: "unknown"), one short constrained call each,
        from the user's dated lines in the kept passages; the decided ones become the plan's slots."""
        lines = dated_user_lines(self.evidence, limit=SLOT_POOL_LINES)
        params = choice_params(self.task.api_schema)
        per_param = await self._lines_per_param(lines, params)
        slots: list[SlotChoice] = []
        for (name, description, values), evidence in zip(params, per_param):
            with self.trace.step("align_slot", {"param": name, "values": list(values), "evidence": evidence}) as step:
                prompt = slot_prompt(self.task, evidence, name, description, values)
                step.llm(prompt, [])
                reply, comps = await complete_json(
                    self.backend, prompt.messages, slot_reply_model(values), max_tokens=self._cap(SLOT_TOKENS), seed=self.env.seed
                )
                step.llm(None, comps)
                step.outputs = {"param": name, "value": reply.value}  # type: ignore[attr-defined]
            # "unknown" leaves the parameter to synthesis, unless the enum holds "unknown" itself
            if reply.value != UNKNOWN or UNKNOWN in values:  # type: ignore[attr-defined]
                slots.append(SlotChoice(param=name, value=reply.value, because="the user's past messages"))  # type: ignore[attr-defined]
        self.plan = AlignmentPlan(slots=slots)
        return self.plan

    async def _lines_per_param(self, lines: list[str], params: list[tuple[str, str, tuple[Any, ...]]]) -> list[list[str]]:
        """Each parameter's `slot_lines` lines most similar (dense) to its name, description and values,
        oldest first; every line for each when `slot_lines` is 0 or covers them all."""
        n = self.o.slot_lines
        if not n or len(lines) <= n or self.index is None or not params:
            return [lines] * len(params)
        queries = [param_query(self.task, name, desc, values) for name, desc, values in params]
        texts = [line.split(" | ", 1)[1] for line in lines]
        vecs = await asyncio.to_thread(self.index.embedder.encode, queries + texts)
        sims = vecs[: len(queries)] @ vecs[len(queries):].T
        return [[lines[j] for j in sorted(np.argsort(-row, kind="stable")[:n])] for row in sims]

    async def broad_thinking(self) -> AlignmentPlan:
        if self.o.align == "slots" and self.task.action == "call_api":
            return await self.align_slots()
        await self.compact_evidence()
        await self.extract_preferences()
        return await self.align_plan()
