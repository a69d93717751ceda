"""The RAG baseline (paper Appendix C.1/C.3): 256-token chunks with 50 overlap, top-3 by dense
similarity to the task (packaged all-MiniLM-L6-v2 by default), concatenated with the task.

A window that starts or ends inside a turn shows `…` at that edge (iba.retrieval.views.passage_text).
`budget=N` (prompt tokens) replaces the fixed k: the best passages in rank order while the prompt
fits N tokens, so rag can be compared with iba at the same prompt size."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from pydantic import Field, model_validator

from iba.agents.answer import answer, check_task, make_action, schema_text
from iba.agents.base import Agent, AgentEnv, check_overlap
from iba.agents.trace import Trace
from iba.prompts import Prompt, render
from iba.retrieval.index import HistoryIndex
from iba.retrieval.passage import Method, Passage, Unit
from iba.retrieval.views import passage_text
from iba.types import Action, Strict, TaskView, Turn


RANK_DEPTH = 64  # passages ranked when a budget, not k, decides how many are shown


class RagOptions(Strict):
    k: int = Field(3, ge=1)  # passages retrieved
    unit: Unit = "token"
    size: int = Field(256, ge=1)
    overlap: int = Field(50, ge=0)
    method: Method = "dense"
    max_tokens: int | None = Field(None, ge=1)
    budget: int | None = Field(None, ge=500)  # prompt tokens; the passages that fit, instead of k

    @model_validator(mode="after")
    def _no_idle_options(self) -> "RagOptions":
        if self.budget is not None and "k" in self.model_fields_set:
            raise ValueError("k would change nothing: budget decides how many passages are shown; give one of them")
        return check_overlap(self)


def rag_prompt(task: TaskView, passages: list[Passage], turns: dict[str, Turn], budget: int | None, count: Callable[[str], int]) -> tuple[Prompt, list[Passage]]:
    """The rag prompt over the ranked passages (cut turns marked): all of them, or with a budget the
    best ones, in rank order, while the prompt fits it. Also returns the passages shown."""
    schema = schema_text(task) if task.action == "call_api" else ""
    texts = [passage_text(p, turns) for p in passages]
    if budget is not None:
        used = sum(count(m["content"]) for m in render("agent_rag", task=task, passages=[], notes=[], schema=schema).messages)
        n = 0
        for i, text in enumerate(texts, 1):
            cost = count(f"--- passage {i} ---\n{text}\n")
            if used + cost > budget:
                break
            used, n = used + cost, n + 1
        passages, texts = passages[:n], texts[:n]
    return render("agent_rag", task=task, passages=texts, notes=[], schema=schema), passages


async def load_index(env: AgentEnv, history: list[Turn], unit: Unit, size: int, overlap: int) -> HistoryIndex:
    """The history's index (disk-cached), built off the event loop: embedding is CPU-bound."""
    return await asyncio.to_thread(
        HistoryIndex.build, history, env.embedder, env.cache_dir, unit=unit, size=size, overlap=overlap
    )


class RagAgent(Agent):
    name = "rag"
    options_model = RagOptions
    opts: RagOptions

    async def act(self, task: TaskView, history: list[Turn]) -> Action:
        check_task(task)
        o = self.opts
        trace = Trace()
        with trace.step("build_index", {"turns": len(history), "embedder": self.env.embedder, "unit": o.unit, "size": o.size, "overlap": o.overlap}) as step:
            index = await load_index(self.env, history, o.unit, o.size, o.overlap)
            step.outputs = {"chunks": len(index), "key": index.key}
        k = RANK_DEPTH if o.budget is not None else o.k
        with trace.step("similarity_retrieve", {"query": task.query, "k": k, "method": o.method}) as step:
            ranked = await asyncio.to_thread(index.search, task.query, k, o.method)
            backend = self.env.backend
            prompt, passages = rag_prompt(task, ranked, {t.id: t for t in history}, o.budget, backend.count_tokens)
            step.outputs = [{"chunk_id": p.chunk_id, "turn_ids": p.turn_ids, "score": round(p.score, 4)} for p in passages]
        with trace.step("answer", {"passages": len(passages)}) as step:
            result = await answer(self.env.backend, prompt, task, step, seed=self.env.seed, max_tokens=o.max_tokens)
            step.outputs = result
        return make_action(task, result, trace.steps)
