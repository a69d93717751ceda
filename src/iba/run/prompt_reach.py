"""The reach of what a configuration would show: the deciding prompts an agent spec renders for a
task at a prompt-token budget, built by the agents' own code without a model, and whether each
checkpoint's or slot's gold clause reaches them whole (iba.eval.reach).

Model-free configurations, since what an LLM step writes cannot be known without running it, unless
a backend is given: then the spec's LLM steps before the deciding prompts run on it (bench/reach.py --model):
`rag` (its budget picks the passages), `direct` (the most recent whole turns that fit), and `iba`
with `expansion=template&reranker=rules` and, where BT+DA runs, `compact=none`. Their later prompts
are built as if every model step before them had answered with nothing (no preferences, no plan):
that leaves the evidence view the most room the agent could give it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from iba.agents.alignment_tools import slot_prompt
from iba.agents.answer import schema_text
from iba.agents.base import AgentEnv, parse_agent_spec, parse_options
from iba.agents.direct import SAFETY, fit_history
from iba.agents.iba_options import IBAOptions
from iba.agents.rag import RANK_DEPTH, RagOptions, load_index, rag_prompt
from iba.agents.toolkit import Toolkit
from iba.agents.trace import Trace, prompt_text
from iba.eval.reach import DecidingPrompt, normalise, reach_of
from iba.llm.base import Backend, approx_tokens
from iba.prompts import render
from iba.retrieval.chunking import turn_line
from iba.types import AnswerKey, TaskView, Turn

AGENTS = ("rag", "direct", "iba")


def check_spec(spec: str, model: bool = False) -> None:
    """ValueError unless `spec` is a configuration whose deciding prompts need no model (`model`: a
    model is given, so its LLM steps before the deciding prompts may run: expansion, salience, compaction)."""
    name, options = parse_agent_spec(spec)
    if name not in AGENTS:
        raise ValueError(f"reach: agent {name!r} cannot be measured without a model; choose one of {', '.join(AGENTS)}")
    if name == "rag":
        parse_options(RagOptions, options, name)
    elif name == "iba":
        o = parse_options(IBAOptions, options, name)
        need = [f"{k}={getattr(o, k)}" for k in ("expansion", "reranker") if o.retrieval and getattr(o, k) != ("template" if k == "expansion" else "rules")]
        if o.btda and o.compact != "none":
            need.append(f"compact={o.compact}")
        if o.retrieval and o.states:
            need.append("states=true")
        if model:
            need = []
            if o.chain:  # the deciding prompts continue one conversation: built only by a whole act()
                raise ValueError(f"reach: {spec!r}: chain=true prompts are not built step by step; measure chain=false")
        elif o.chain:
            need.append("chain=true")
        if need:
            raise ValueError(f"reach: {spec!r} needs a model ({', '.join(need)}); the model-free configuration is "
                             "iba?expansion=template&reranker=rules&compact=none")


class SpecPrompts:
    """One spec on one task: retrieval once, then the deciding prompts at any budget."""

    def __init__(self, spec: str, task: TaskView, history: list[Turn], cache_dir: Path, embedder: str = "minilm",
                 scenarios: Sequence[str] = (), backend: Backend | None = None, seed: int = 42) -> None:
        check_spec(spec, model=backend is not None)
        self.name, self.options = parse_agent_spec(spec)
        self.task, self.history = task, history
        # with a backend, the spec's LLM steps before the deciding prompts run on it (a real expansion call)
        self.env = AgentEnv(backend=backend, cache_dir=cache_dir, embedder=embedder, scenarios=tuple(scenarios), seed=seed)  # type: ignore[arg-type]
        self._tools: Toolkit | None = None
        self._ranked: list | None = None

    async def prompts(self, budget: int) -> list[DecidingPrompt]:
        if self.name == "rag":
            return await self._rag(budget)
        if self.name == "direct":
            return self._direct(budget)
        return await self._iba(budget)

    async def _rag(self, budget: int) -> list[DecidingPrompt]:
        o = parse_options(RagOptions, self.options, "rag")
        if self._ranked is None:
            index = await load_index(self.env, self.history, o.unit, o.size, o.overlap)
            self._ranked = await asyncio.to_thread(index.search, self.task.query, RANK_DEPTH, o.method)
        prompt, _ = rag_prompt(self.task, self._ranked, {t.id: t for t in self.history}, budget, approx_tokens)
        return [DecidingPrompt("answer", None, normalise(prompt_text(prompt)))]

    def _direct(self, budget: int) -> list[DecidingPrompt]:
        schema = schema_text(self.task) if self.task.action == "call_api" else ""
        bare = render("agent_direct", task=self.task, history=[], dropped=0, schema=schema)
        room = budget - sum(approx_tokens(m["content"]) for m in bare.messages) - SAFETY
        lines = fit_history(self.history, max(0, room), approx_tokens, turn_line)
        prompt = render("agent_direct", task=self.task, history=lines, dropped=len(self.history) - len(lines), schema=schema)
        return [DecidingPrompt("answer", None, normalise(prompt_text(prompt)))]

    async def _iba(self, budget: int) -> list[DecidingPrompt]:
        opts = parse_options(IBAOptions, {**self.options, "budget": str(budget)}, "iba")
        if self._tools is None:
            self._tools = Toolkit(self.env, opts, self.task, self.history, Trace())
            await (self._tools.deep_retrieve() if opts.retrieval else self._tools.plain_retrieve())
        tools = self._tools
        tools.o = opts
        out: list[DecidingPrompt] = []
        if opts.btda and opts.align == "slots" and self.task.action == "call_api":
            for (name, description, values), view in await tools.slot_views():
                text = prompt_text(slot_prompt(self.task, view.lines, name, description, values))
                out.append(DecidingPrompt("align_slot", name, normalise(text)))
        elif opts.btda:
            evidence, _ = await tools.extract_evidence()
            text = prompt_text(render("agent_extract", task=self.task, evidence=evidence))
            out.append(DecidingPrompt("extract_preferences", None, normalise(text)))
        prompt, _ = await tools.synthesis_prompt(opts.synthesis)
        out.append(DecidingPrompt("synthesize", None, normalise(prompt_text(prompt))))
        return out


class ReachTable:
    """Reach per (spec, budget), slots and checkpoints apart, accumulated over instances."""

    def __init__(self, specs: Sequence[str], budgets: Sequence[int]) -> None:
        self.specs, self.budgets = list(specs), list(budgets)
        # (spec, budget) -> kind -> [reached flags]; and the deciding prompts' mean size
        self.values: dict[tuple[str, int], dict[str, list[bool]]] = {(s, b): {"slots": [], "checkpoints": []} for s in self.specs for b in self.budgets}
        self.tokens: dict[tuple[str, int], list[int]] = {(s, b): [] for s in self.specs for b in self.budgets}

    async def add(self, task: TaskView, key: AnswerKey, history: list[Turn], cache_dir: Path, embedder: str = "minilm",
                  scenarios: Sequence[str] = ()) -> dict[tuple[str, int], dict[str, bool | None]]:
        """Measure one instance; returns (spec, budget) -> target id -> reached."""
        turns = {t.id: t for t in history}
        slots = {s.id for s in key.slots}
        out = {}
        for spec in self.specs:
            sp = SpecPrompts(spec, task, history, cache_dir, embedder, scenarios)
            for budget in self.budgets:
                prompts = await sp.prompts(budget)
                got = reach_of(key, turns, prompts)
                out[(spec, budget)] = got
                self.tokens[(spec, budget)].append(max(approx_tokens(p.text) for p in prompts))
                for tid, hit in got.items():
                    if hit is not None:
                        self.values[(spec, budget)]["slots" if tid in slots else "checkpoints"].append(hit)
        return out

    def summary(self) -> list[dict]:
        rows = []
        for (spec, budget), kinds in self.values.items():
            row: dict = {"agent": spec, "budget": budget}
            for kind, flags in kinds.items():
                row[kind] = round(sum(flags) / len(flags), 4) if flags else None
                row["n_" + kind] = len(flags)
            toks = self.tokens[(spec, budget)]
            row["tokens"] = round(sum(toks) / len(toks), 1) if toks else 0.0
            rows.append(row)
        return rows
