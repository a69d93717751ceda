"""The RAG baseline (paper Appendix C.1/C.3): 256-token chunks with 50 overlap, top-3 by dense
similarity to the task (packaged all-MiniLM-L6-v2 by default), concatenated with the task."""

from __future__ import annotations

import asyncio

from pydantic import Field, model_validator

from iba.agents.answer import answer, check_task, make_action, schema_text
from iba.agents.base import Agent, AgentEnv, check_overlap, parse_options
from iba.agents.trace import Trace
from iba.prompts import render
from iba.retrieval.index import HistoryIndex
from iba.retrieval.passage import Method, Unit
from iba.types import Action, Strict, TaskView, Turn


class RagOptions(Strict):
    k: int = Field(3, ge=1)  # passages retrieved
    unit: Unit = "token"
    size: int = Field(256, ge=1)
    overlap: int = Field(50, ge=0)
    method: Method = "dense"
    max_tokens: int | None = Field(None, ge=1)

    @model_validator(mode="after")
    def _overlap(self) -> RagOptions:
        return check_overlap(self)


async def load_index(env: AgentEnv, history: list[Turn], unit: Unit, size: int, overlap: int) -> HistoryIndex:
    """The history's index (disk-cached), built off the event loop: embedding is CPU-bound."""
    return await asyncio.to_thread(
        HistoryIndex.build, history, env.embedder, env.cache_dir, unit=unit, size=size, overlap=overlap
    )


class RagAgent(Agent):
    name = "rag"

    def __init__(self, env: AgentEnv, /, **options: str) -> None:
        super().__init__(env, **options)
        self.opts: RagOptions = parse_options(RagOptions, options, self.name)

    async def act(self, task: TaskView, history: list[Turn]) -> Action:
        check_task(task)
        o = self.opts
        trace = Trace()
        with trace.step("build_index", {"turns": len(history), "embedder": self.env.embedder, "unit": o.unit, "size": o.size, "overlap": o.overlap}) as step:
            index = await load_index(self.env, history, o.unit, o.size, o.overlap)
            step.outputs = {"chunks": len(index), "key": index.key}
        with trace.step("similarity_retrieve", {"query": task.query, "k": o.k, "method": o.method}) as step:
            passages = await asyncio.to_thread(index.search, task.query, o.k, o.method)
            step.outputs = [{"chunk_id": p.chunk_id, "turn_ids": p.turn_ids, "score": round(p.score, 4)} for p in passages]
        with trace.step("answer", {"passages": len(passages)}) as step:
            schema = schema_text(task) if task.action == "call_api" else ""
            prompt = render("agent_rag", task=task, passages=[p.text for p in passages], notes=[], schema=schema)
            result = await answer(self.env.backend, prompt, task, step, seed=self.env.seed, max_tokens=o.max_tokens)
            step.outputs = result
        return make_action(task, result, trace.steps)
