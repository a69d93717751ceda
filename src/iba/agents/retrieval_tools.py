"""The Deep Retrieval tools of the IBA-Agent (paper section 4): index, searches, pool, salience."""

from __future__ import annotations

import asyncio

from iba.agents.passage_views import passage_brief, user_view
from iba.agents.rag import load_index
from iba.agents.replies import SALIENCE_TOKENS_PER_PASSAGE, salience_reply_model
from iba.agents.tool_state import ToolState
from iba.llm.structured import complete_json
from iba.prompts import render
from iba.retrieval.deep import (
    CONTRAST_WEIGHT,
    CUE_SCAN_K,
    FEEDBACK_K,
    CandidatePool,
    contrast_scores,
    cue_scan,
    feedback_queries,
    filter_redundant,
    fold_history_repeats,
    labelled_queries,
    merge_rankings,
    scenario_contrast,
)
from iba.retrieval.expansion import FACETS, FacetQueries, schema_terms, template_queries
from iba.retrieval.index import HistoryIndex
from iba.retrieval.llm_expansion import EXPANSION_TOKENS, llm_facet_queries
from iba.retrieval.passage import Method, Passage
from iba.retrieval.salience import SalienceScore, rule_scores, select


class DeepRetrievalTools(ToolState):
    async def build_index(self) -> HistoryIndex:
        if self.index is None:
            o = self.o
            inputs = {"turns": len(self.history), "embedder": self.env.embedder, "unit": o.unit, "size": o.size, "overlap": o.overlap}
            with self.trace.step("build_index", inputs) as step:
                self.index = await load_index(self.env, self.history, o.unit, o.size, o.overlap)
                step.outputs = {"chunks": len(self.index), "key": self.index.key}
        return self.index

    async def similarity_retrieve(
        self, query: str | None = None, k: int | None = None, label: str = "task", method: Method | None = None
    ) -> list[Passage]:
        """Top-k passages for a query (the task text by default); they join the candidate pool."""
        index = await self.build_index()
        query = query or self.task.query
        k = k or self.o.k
        method = method or self.o.method
        with self.trace.step("similarity_retrieve", {"query": query, "k": k, "method": method}) as step:
            found = await asyncio.to_thread(index.search, query, k, method)
            self.rankings.append((label, found))
            step.outputs = [passage_brief(p) for p in found]
        return found

    async def expand_queries(self) -> FacetQueries:
        """The five facet sub-queries of Table 3 (LLM, one JSON call; or the template)."""
        options = schema_terms(self.task.api_schema)
        with self.trace.step("expand_queries", {"query": self.task.query, "mode": self.o.expansion}) as step:
            if self.o.expansion == "template":
                self.queries = template_queries(self.task)
            else:
                prompt = render("agent_query_expansion", task=self.task, options=options)
                step.llm(prompt, [])
                self.queries, comps = await llm_facet_queries(self.backend, self.task, self.env.seed, self._cap(EXPANSION_TOKENS))
                step.llm(None, comps)
            step.outputs = self.queries
        return self.queries

    async def facet_retrieve(self) -> list[Passage]:
        """Top-k passages for each facet sub-query, embedded in one batch; they join the pool."""
        index = await self.build_index()
        queries = self.queries or await self.expand_queries()
        with self.trace.step("facet_retrieve", {"queries": queries, "k": self.o.k, "method": self.o.method}) as step:
            texts = [q for _, q in queries.items()]
            results = await asyncio.to_thread(index.search_many, texts, self.o.k, self.o.method)
            new: list[Passage] = []
            for facet, found in zip(FACETS, results):
                self.rankings.append((facet, found))
                new.extend(found)
            step.outputs = {f: [p.chunk_id for p in found] for f, found in zip(FACETS, results)}
        return new

    async def cue_scan_retrieve(self) -> list[Passage]:
        """Signal-first scan: among passages where the user voiced a preference (Table 12 cues), the
        ones most similar to the task and facet queries; they join the pool as one more ranking."""
        index = await self.build_index()
        texts = [q for _, q in labelled_queries(self.task, self.queries)] if self.queries else [self.task.query]
        with self.trace.step("cue_scan", {"queries": texts, "k": CUE_SCAN_K}) as step:
            found = await asyncio.to_thread(cue_scan, index, texts)
            self.rankings.append(("cue_scan", found))
            step.outputs = [p.chunk_id for p in found]
        return found

    async def feedback_retrieve(self) -> list[Passage]:
        """Relevance feedback: search again with the cue-bearing user lines of the best candidates,
        to find the other sessions where the user said the same thing (or changed it)."""
        index = await self.build_index()
        queries = feedback_queries(merge_rankings(self.rankings))
        with self.trace.step("feedback_retrieve", {"queries": [q for _, q in queries], "k": FEEDBACK_K}) as step:
            results = await asyncio.to_thread(index.search_many, [q for _, q in queries], FEEDBACK_K, self.o.method) if queries else []
            new: list[Passage] = []
            for (label, _), found in zip(queries, results):
                self.rankings.append((label, found))
                new.extend(found)
            step.outputs = [[p.chunk_id for p in found] for found in results]
        return new

    def filter_redundant(self) -> CandidatePool:
        """Merge everything retrieved so far; drop repeats by content hash and high word overlap."""
        with self.trace.step("filter_redundant", {"rankings": [[lbl, [p.chunk_id for p in ps]] for lbl, ps in self.rankings]}) as step:
            merged = merge_rankings(self.rankings)
            self.pool, dropped = filter_redundant(merged)
            step.outputs = {"candidates": [p.chunk_id for p in self.pool.passages], "dropped": dropped}
        return self.pool

    async def rerank_salience(self) -> list[Passage]:
        """Salience 0-10 per Table 12 (relevance 0-6 + signal 0-4), keep >= retain_at, at most max_passages.

        The rule scorer sees every candidate; the LLM scorer sees the first `max_candidates` in
        fused order (a prompt-token budget), each shown as the user's own lines, which is what
        Table 12 scores: all in one call (`llm`) or one call each (`each`, the naive baseline).
        """
        pool = self.pool or self.filter_redundant()
        n = len(pool.passages) if self.o.reranker == "rules" else min(len(pool.passages), self.o.max_candidates)
        cands = pool.passages[:n]
        inputs = {"candidates": [p.chunk_id for p in cands], "mode": self.o.reranker, "retain_at": self.o.retain_at}
        with self.trace.step("rerank_salience", inputs) as step:
            if not cands:
                scores: list[SalienceScore] = []
            elif self.o.reranker == "rules":
                scores = rule_scores(cands, pool.best_ranks[:n], pool.hits[:n])
                if self.o.contrast:
                    scores = await self._contrast(cands, scores)
            elif self.o.reranker == "each":
                scores = []
                for p in cands:  # same template, one passage per call: the scores do not see each other
                    prompt = render("agent_salience", task=self.task, passages=[user_view(p)], n=1)
                    step.llm(prompt, [])
                    reply, comps = await complete_json(
                        self.backend, prompt.messages, salience_reply_model(1),
                        max_tokens=self._cap(SALIENCE_TOKENS_PER_PASSAGE + 40), seed=self.env.seed,
                    )
                    step.llm(None, comps)
                    scores.append(SalienceScore(relevance=reply.scores[0].relevance, signal=reply.scores[0].signal))
            else:
                cap = self._cap(SALIENCE_TOKENS_PER_PASSAGE * n + 40)
                prompt = self.prompts.prompt("agent_salience", cap, task=self.task, passages=[user_view(p) for p in cands], n=n)
                self.shown = {p.chunk_id: f"P{i}" for i, p in enumerate(cands, 1)}
                step.llm(prompt, [])
                reply, comps = await complete_json(
                    self.backend, prompt.messages, salience_reply_model(n), max_tokens=cap, seed=self.env.seed,
                )
                step.llm(None, comps)
                self.prompts.answered(prompt, comps[-1].text)
                scores = [SalienceScore(relevance=s.relevance, signal=s.signal) for s in reply.scores]
            self.evidence = select(cands, scores, self.o.retain_at, self.o.max_passages)
            fallback = None
            if cands and not self.evidence and self.o.reranker != "rules":
                # a weak scorer that keeps nothing would leave the later steps blind: use Table 12 by rules
                fallback = "rules"
                scores = rule_scores(cands, pool.best_ranks[:n], pool.hits[:n])
                self.evidence = select(cands, scores, self.o.retain_at, self.o.max_passages)
            if self.o.repeats and self.evidence:
                index = await self.build_index()
                self.evidence = await asyncio.to_thread(fold_history_repeats, index, self.evidence)
            step.outputs = {
                "fallback": fallback,
                "scores": {p.chunk_id: s.total for p, s in zip(cands, scores)},
                "unscored": [p.chunk_id for p in pool.passages[n:]],
                "retained": [passage_brief(p) for p in self.evidence],
            }
        return self.evidence

    async def _contrast(self, cands: list[Passage], scores: list[SalienceScore]) -> list[SalienceScore]:
        index = await self.build_index()
        contrast = await asyncio.to_thread(scenario_contrast, index, cands, self.task.scenario_name, self.env.scenarios)
        return scores if contrast is None else contrast_scores(scores, contrast, CONTRAST_WEIGHT)

    async def plain_retrieve(self) -> list[Passage]:
        """Ablation "w/o Deep Retrieval": the task's top-k dense passages are the evidence."""
        self.evidence = await self.similarity_retrieve(k=3, method="dense")
        return self.evidence

    async def deep_retrieve(self) -> list[Passage]:
        await self.similarity_retrieve()
        await self.expand_queries()
        await self.facet_retrieve()
        if self.o.scan:
            await self.cue_scan_retrieve()
        if self.o.feedback:
            await self.feedback_retrieve()
        self.filter_redundant()
        return await self.rerank_salience()
