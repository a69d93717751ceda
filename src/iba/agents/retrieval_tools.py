"""The Deep Retrieval tools of the IBA-Agent (paper section 4): the stages of the one Deep Retrieval
pipeline (iba.retrieval.deep.DeepRetrieval, which `iba eval-retrieval` measures), with the agent's
LLM expansion and LLM salience scorer plugged in when its options ask for them."""

from __future__ import annotations

from iba.agents.rag import load_index
from iba.agents.replies import SALIENCE_TOKENS_PER_PASSAGE, salience_reply_model
from iba.agents.tool_state import ToolState
from iba.prompts import render
from iba.retrieval.deep import CandidatePool, DeepRetrieval, StepLike
from iba.retrieval.expansion import FacetQueries, schema_terms
from iba.retrieval.index import HistoryIndex
from iba.retrieval.llm_expansion import EXPANSION_TOKENS, STATE_TOKENS, llm_facet_queries, llm_state_queries, state_prompt
from iba.retrieval.passage import Passage
from iba.retrieval.salience import SalienceScore
from iba.retrieval.views import user_view


class DeepRetrievalTools(ToolState):
    def _pipeline(self) -> DeepRetrieval:
        o = self.o
        return DeepRetrieval(
            self.task, o, self.build_index,
            expand=self._llm_expand if o.expansion == "llm" else None,
            score=self._llm_score if o.reranker != "rules" else None,
            scenarios=self.env.scenarios, trace=self.trace,
            states=self._llm_states if o.states else None,
        )

    async def build_index(self) -> HistoryIndex:
        if self.index is None:
            o = self.o
            inputs = {"turns": len(self.history), "embedder": self.env.embedder, "unit": o.unit, "size": o.size, "overlap": o.overlap}
            with self.trace.step("build_index", inputs) as step:
                self.index = await load_index(self.env, self.history, o.unit, o.size, o.overlap)
                step.outputs = {"chunks": len(self.index), "key": self.index.key}
        return self.index

    async def rerank_salience(self) -> list[Passage]:
        """Deep Retrieval's filter and rerank over all found so far: the kept passages are the evidence."""
        self.evidence = await self.deep.narrow()
        self.ranked = self.deep.ranked
        return self.evidence

    async def _llm_expand(self, task, step: StepLike) -> FacetQueries:
        prompt = render("agent_query_expansion", task=task, options=schema_terms(task.api_schema))
        step.llm(prompt, [])
        queries, comps = await llm_facet_queries(self.backend, task, self.env.seed, self._cap(EXPANSION_TOKENS))
        step.llm(None, comps)
        return queries

    async def _llm_states(self, task, step: StepLike) -> list[str]:
        step.llm(state_prompt(task), [])
        states, comps = await llm_state_queries(self.backend, task, self.env.seed, self._cap(STATE_TOKENS))
        step.llm(None, comps)
        return states

    async def _llm_score(self, cands: list[Passage], pool: CandidatePool, step: StepLike) -> list[SalienceScore]:
        """Table 12 by the model: all candidates in one call (`llm`) or one call each (`each`, the naive
        baseline), each shown as the user's own lines of the passage, cut turns marked."""
        shown = [user_view(p, self.turns) for p in cands]
        if self.o.reranker == "each":
            scores = []
            for text in shown:  # same template, one passage per call: the scores do not see each other
                reply, _ = await self.ask(step, render("agent_salience", task=self.task, passages=[text], n=1),
                                          salience_reply_model(1), self._cap(SALIENCE_TOKENS_PER_PASSAGE + 40))
                scores.append(SalienceScore(relevance=reply.scores[0].relevance, signal=reply.scores[0].signal))
            return scores
        n = len(cands)
        self.shown = {p.chunk_id: f"P{i}" for i, p in enumerate(cands, 1)}
        reply = await self.chained(step, "agent_salience", salience_reply_model(n),
                                   SALIENCE_TOKENS_PER_PASSAGE * n + 40, task=self.task, passages=shown, n=n)
        return [SalienceScore(relevance=s.relevance, signal=s.signal) for s in reply.scores]

    async def plain_retrieve(self) -> list[Passage]:
        """Ablation "w/o Deep Retrieval": the task's top-3 dense passages are the evidence."""
        self.evidence = await self.deep.search(k=3, method="dense")
        self.ranked = list(self.evidence)
        return self.evidence

    async def deep_retrieve(self) -> list[Passage]:
        await self.deep.run()
        self.evidence, self.ranked = self.deep.evidence, self.deep.ranked
        return self.evidence
