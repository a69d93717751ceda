"""The Broad Thinking & Deep Alignment tools of the IBA-Agent: compact, extract, align; and, for
CallAPI tasks with `align=slots`, align_slots: one constrained choice per API parameter instead.

Why align_slots (ours, beyond the paper): with the 1.5B model the extract -> align chain named the
gold value for none of the slots whose evidence it had kept (bench/BENCHMARKS.md, session 7). A
small model answers a narrow question better than it writes a plan: one parameter, its allowed
values, and the user's turns that bear most on that parameter.

Every step that decides (extract, align_slot, synthesize) reads an evidence view
(iba.retrieval.views): whole user turns of the ranked passages, most relevant first, within the
`budget` of its prompt. Without compaction (`compact=none`) the extractor reads that view itself.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Any

import numpy as np

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
from iba.prompts import Prompt, render
from iba.retrieval.expansion import schema_terms
from iba.retrieval.text_vectors import TextVectors
from iba.retrieval.views import View, evidence_view, passage_text, user_view
from iba.types import TaskView


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
            else:
                shown = self.shown if self.prompts.open else {}
                self.compacted = await self.chained(
                    step, "agent_compact", CompactEvidence, COMPACT_TOKENS, task=self.task,
                    passages=[passage_text(p, self.turns) for p in passages],
                    refs=[shown[p.chunk_id] for p in passages if p.chunk_id in shown],
                    extra=[user_view(p, self.turns) for p in passages if p.chunk_id not in shown],
                )
            step.outputs = self.compacted
        return self.compacted

    async def view(self, budget: int, queries: Sequence[str] | None = None) -> View:
        """The evidence view of the ranked passages within `budget` tokens, by relevance to `queries`
        (default: the task, its scenario and the queries Deep Retrieval searched with)."""
        if queries is None:
            queries = self.deep.view_queries()
        encode = self._encode if self.index is not None else None
        latest = [t for t in reversed(self.history) if t.role == "user" and t.timestamp <= self.task.now] if self.o.recent else []
        return await asyncio.to_thread(evidence_view, self.ranked, self.turns, budget, self.count, queries, encode, self.o.view,
                                       latest, budget * self.o.recent // 100)

    def _encode(self, texts: list[str]) -> np.ndarray:
        """Vectors of texts, memoised per task (each view asks for the same turns again) and read from
        the text-keyed vector store of the index cache (turn and mixed indexes hold every turn)."""
        memo: dict[str, np.ndarray] = self.__dict__.setdefault("_vectors", {})
        new = list(dict.fromkeys(t for t in texts if t not in memo))
        if new:
            embedder = self.index.embedder  # type: ignore[union-attr]
            with contextlib.closing(TextVectors(self.env.cache_dir, embedder)) as store:
                memo.update(zip(new, store.encode(new)))
        return np.stack([memo[t] for t in texts])

    def room(self, name: str, **variables: Any) -> int:
        """Tokens left for evidence in a `budget`-token prompt `name`, given its other variables."""
        bare = render(name, **variables)
        return self.o.budget - sum(self.count(m["content"]) for m in bare.messages)

    async def extract_evidence(self) -> tuple[list[str], View | None]:
        """The extractor's evidence: the compacted quotes (compact=llm), else the evidence view."""
        if self.o.compact == "llm":
            compacted = self.compacted or await self.compact_evidence()
            return [f"{i.date or 'undated'} | {i.quote}" for i in compacted.items], None
        view = await self.view(self.room("agent_extract", task=self.task, evidence=[]))
        return view.lines, view

    async def extract_preferences(self) -> ResolvedPreferences:
        """Asked for / corrected / rejected / repeatedly chose / recently updated, then latest wins."""
        evidence, view = await self.extract_evidence()
        inputs = {"evidence": evidence} | (view_brief(view) if view else {})
        with self.trace.step("extract_preferences", inputs) as step:
            if not evidence:
                extracted = ExtractedPreferences(preferences=[])
            else:
                extracted = await self.chained(step, "agent_extract", ExtractedPreferences, EXTRACT_TOKENS,
                                               task=self.task, evidence=evidence)
            self.preferences = resolve_latest(extracted.preferences)
            step.outputs = {"extracted": extracted, "resolved": self.preferences}
        return self.preferences

    async def align_plan(self) -> AlignmentPlan:
        """Style/structure/constraints for text; a value per slot for API calls."""
        prefs = self.preferences or await self.extract_preferences()
        lines = preference_lines(prefs)
        options = schema_terms(self.task.api_schema)
        with self.trace.step("align_plan", {"preferences": lines}) as step:
            self.plan = await self.chained(step, "agent_align", AlignmentPlan, ALIGN_TOKENS, task=self.task,
                                           preferences=lines, options=options)
            step.outputs = self.plan
        return self.plan

    async def slot_views(self) -> list[tuple[tuple[str, str, tuple[Any, ...]], View]]:
        """Per choice parameter of the API: its evidence view, the user's turns most relevant to that
        parameter (its name, description and values) within the prompt's budget."""
        out = []
        for name, description, values in choice_params(self.task.api_schema):
            room = self.o.budget - sum(self.count(m["content"]) for m in slot_prompt(self.task, [], name, description, values).messages)
            out.append(((name, description, values), await self.view(room, [param_query(self.task, name, description, values)])))
        return out

    async def align_slots(self) -> AlignmentPlan:
        """A value per choice parameter of the API (or none: "unknown"), one short constrained call each,
        over that parameter's evidence view; the decided ones become the plan's slots."""
        slots: list[SlotChoice] = []
        for (name, description, values), view in await self.slot_views():
            evidence = view.lines
            with self.trace.step("align_slot", {"param": name, "values": list(values), "evidence": evidence} | view_brief(view)) as step:
                reply, _ = await self.ask(step, slot_prompt(self.task, evidence, name, description, values),
                                          slot_reply_model(values), self._cap(SLOT_TOKENS))
                step.outputs = {"param": name, "value": reply.value}  # type: ignore[attr-defined]
            # "unknown" leaves the parameter to synthesis, unless the enum holds "unknown" itself
            if reply.value != UNKNOWN or UNKNOWN in values:  # type: ignore[attr-defined]
                slots.append(SlotChoice(param=name, value=reply.value, because="the user's past messages"))  # type: ignore[attr-defined]
        self.plan = AlignmentPlan(slots=slots)
        return self.plan

    async def broad_thinking(self) -> AlignmentPlan:
        if self.o.align == "slots" and self.task.action == "call_api":
            return await self.align_slots()
        if self.o.compact == "llm":
            await self.compact_evidence()
        await self.extract_preferences()
        return await self.align_plan()


def view_brief(view: View) -> dict[str, Any]:
    """What a trace keeps of a view besides its lines: the turns shown, those cut, what was left out."""
    return {"view": {"turns": view.turn_ids, "cut": view.cut, "tokens": view.tokens, "left_out": view.left_out}}
