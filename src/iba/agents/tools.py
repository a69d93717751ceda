"""The IBA-Agent tools (paper section 4), shared by the pipeline (`iba`) and the FC variant (`iba-fc`).

Deep Retrieval: build_index, similarity_retrieve, expand_queries, facet_retrieve, filter_redundant,
rerank_salience. Broad Thinking & Deep Alignment: compact_evidence, extract_preferences (the code
then keeps the latest value per aspect), align_plan. Synthesis: synthesize.

Each tool is a method of `Toolkit`, which holds one task's state (candidate pool, evidence,
preferences, plan) and records every call as a TraceStep with typed inputs and outputs. LLM steps
use a template from iba/prompts (agent_*.jinja) and `complete_json` against a pydantic reply model.
Reply models ignore unknown keys (models add "passage": n and the like) but validate the rest.
"""

from __future__ import annotations

import asyncio
import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from iba.agents.answer import answer, schema_text
from iba.agents.base import AgentEnv
from iba.agents.rag import load_index
from iba.agents.trace import Trace
from iba.llm.base import Backend, Completion
from iba.llm.structured import complete_json
from iba.prompts import render
from iba.retrieval.deep import (
    CUE_SCAN_K,
    FEEDBACK_K,
    REPEAT_NOTE,
    CandidatePool,
    cue_scan,
    feedback_queries,
    filter_redundant,
    fold_history_repeats,
    labelled_queries,
    merge_rankings,
)
from iba.retrieval.expansion import FACETS, FacetQueries, schema_terms, template_queries
from iba.retrieval.index import HistoryIndex
from iba.retrieval.passage import Method, Passage, Unit
from iba.retrieval.salience import SalienceScore, rule_scores, select, signal_type
from iba.types import Strict, TaskView, Turn

# Reply caps in tokens, from each reply model's bounds (items x characters) at a pessimistic
# 2.5 characters per token: a grammar-constrained reply always fits, so none is cut off.
EXPANSION_TOKENS = 480
SALIENCE_TOKENS_PER_PASSAGE = 16
COMPACT_TOKENS = 660
EXTRACT_TOKENS = 760
ALIGN_TOKENS = 1200

_USER_LINE = re.compile(r"^\[(\d{4}-\d{2}-\d{2}) user\] ?(.*)$")

PreferenceKind = Literal["asked_for", "corrected", "rejected", "repeatedly_chose", "recently_updated"]


class IBAOptions(Strict):
    """Options of the `iba` agent (and `iba-fc`), from the spec: `iba?retrieval=false&reranker=rules`."""

    retrieval: bool = True  # Deep Retrieval; false = plain top-3 dense (ablation "w/o Deep Retrieval")
    btda: bool = True  # Broad Thinking & Deep Alignment (ablation "w/o BT+DA")
    synthesis: Literal["plan", "rag"] = "plan"  # rag = the RAG-style synthesis ablation
    expansion: Literal["llm", "template"] = "llm"
    reranker: Literal["llm", "rules"] = "llm"
    compact: Literal["llm", "rules"] = "llm"
    unit: Unit = "token"
    size: int = 256
    overlap: int = 50
    # passages per query and search: the paper's C.3 is top-3 dense (k=3&method=dense); top-5
    # hybrid (dense + BM25 by RRF) finds more evidence with the small offline MiniLM (see eval-retrieval)
    k: int = 5
    method: Method = "hybrid"
    feedback: bool = True  # relevance-feedback search with the best candidates' cue lines
    scan: bool = True  # signal-first scan: cue-bearing passages most similar to the queries
    repeats: bool = True  # fold in the turns where the user repeated a kept passage's cue sentence
    max_candidates: int = 15  # passages the salience scorer sees (prompt-token budget)
    max_passages: int = 10
    retain_at: int = 5
    max_tokens: int | None = None  # final answer length
    step_max_tokens: int | None = None  # cap on every intermediate step's reply (quick tests)


# --------------------------------------------------------------------------- typed step I/O


class Reply(BaseModel):
    # unknown keys are ignored when validating, but the schema sent for constrained decoding
    # forbids them, and every string and list has a bound: a grammar then cannot ramble, and the
    # step's max_tokens (computed from those bounds) never cuts a reply short
    model_config = ConfigDict(extra="ignore", json_schema_extra={"additionalProperties": False})


class SalienceItem(Reply):
    relevance: Literal[0, 1, 2, 3, 4, 5, 6]  # enums, not ge/le: llama.cpp grammars enforce enums only
    signal: Literal[0, 1, 2, 3, 4]


Query = Annotated[str, Field(min_length=3, max_length=200)]


class FacetQueriesReply(Reply):
    """The LLM's facet queries (bounded for decoding); converted to retrieval's FacetQueries."""

    style: Query
    structure: Query
    decision: Query
    correction: Query
    habit: Query


def salience_reply_model(n: int) -> type[Reply]:
    """{"scores": [...]} with exactly n entries (the length is in the schema, so grammars enforce it)."""

    class SalienceReply(Reply):
        scores: list[SalienceItem] = Field(min_length=n, max_length=n)

    return SalienceReply


class EvidenceItem(Reply):
    date: str = Field("", max_length=10)
    quote: str = Field(min_length=1, max_length=160)


class CompactEvidence(Reply):
    items: list[EvidenceItem] = Field(max_length=8)


class Preference(Reply):
    aspect: str = Field(min_length=1, max_length=40)
    value: str = Field(min_length=1, max_length=120)
    kind: PreferenceKind = "asked_for"
    date: str = Field("", max_length=10)


class ExtractedPreferences(Reply):
    preferences: list[Preference] = Field(max_length=8)


class ResolvedPreferences(Strict):
    current: list[dict[str, Any]]  # Preference dumps, latest first, one per aspect
    superseded: list[dict[str, Any]]  # older values of an aspect that was updated later


Instruction = Annotated[str, Field(min_length=1, max_length=120)]


class SlotChoice(Reply):
    param: str = Field(max_length=40)
    value: str | int | float | bool
    because: str = Field("", max_length=80)


class AlignmentPlan(Reply):
    style: list[Instruction] = Field(default_factory=list, max_length=4)
    structure: list[Instruction] = Field(default_factory=list, max_length=4)
    constraints: list[Instruction] = Field(default_factory=list, max_length=4)
    slots: list[SlotChoice] = Field(default_factory=list, max_length=8)

    def lines(self) -> list[str]:
        out = [f"Style: {s}" for s in self.style] + [f"Structure: {s}" for s in self.structure]
        out += [f"Constraint: {s}" for s in self.constraints]
        out += [f"Set {s.param} = {s.value}" + (f" ({s.because})" if s.because else "") for s in self.slots]
        return out


def resolve_latest(prefs: list[Preference]) -> ResolvedPreferences:
    """One value per aspect: the one with the latest date wins (ties: the later-listed one)."""
    latest: dict[str, tuple[int, Preference]] = {}
    superseded: list[Preference] = []
    for i, p in enumerate(prefs):
        key = " ".join(p.aspect.lower().split())
        if key in latest and (latest[key][1].date, latest[key][0]) > (p.date, i):
            superseded.append(p)
            continue
        if key in latest:
            superseded.append(latest[key][1])
        latest[key] = (i, p)
    current = sorted((p for _, p in latest.values()), key=lambda p: p.date, reverse=True)
    return ResolvedPreferences(
        current=[p.model_dump() for p in current], superseded=[p.model_dump() for p in superseded]
    )


def preference_lines(resolved: ResolvedPreferences) -> list[str]:
    return [f"{p['aspect']}: {p['value']} ({p['kind']}, {p['date'] or 'undated'})" for p in resolved.current]


async def llm_facet_queries(
    backend: Backend, task: TaskView, seed: int, max_tokens: int = EXPANSION_TOKENS
) -> tuple[FacetQueries, list[Completion]]:
    """Table 3's five facet sub-queries from the LLM, in one JSON call."""
    prompt = render("agent_query_expansion", task=task, options=schema_terms(task.api_schema))
    reply, comps = await complete_json(backend, prompt.messages, FacetQueriesReply, max_tokens=max_tokens, seed=seed)
    return FacetQueries(**reply.model_dump(include=set(FACETS))), comps


def user_view(p: Passage, limit: int = 900) -> str:
    """A passage as the user's own dated lines (what Table 12 scores), or its start if it has none."""
    lines = [line for line in p.text.splitlines() if _USER_LINE.match(line) or line.startswith(REPEAT_NOTE)]
    return ("\n".join(lines) or p.text)[:limit]


def passage_brief(p: Passage) -> dict[str, Any]:
    return {"chunk_id": p.chunk_id, "turn_ids": p.turn_ids, "score": round(p.score, 4), "facets": p.facets}


# --------------------------------------------------------------------------- the toolkit


class Toolkit:
    """The tools over one (task, history), with their shared state and trace."""

    def __init__(self, env: AgentEnv, opts: IBAOptions, task: TaskView, history: list[Turn], trace: Trace) -> None:
        self.env = env
        self.o = opts
        self.task = task
        self.history = history
        self.trace = trace
        self.index: HistoryIndex | None = None
        self.rankings: list[tuple[str, list[Passage]]] = []
        self.queries: FacetQueries | None = None
        self.pool: CandidatePool | None = None
        self.evidence: list[Passage] = []
        self.compacted: CompactEvidence | None = None
        self.preferences: ResolvedPreferences | None = None
        self.plan: AlignmentPlan | None = None

    @property
    def backend(self) -> Backend:
        return self.env.backend

    def _cap(self, tokens: int) -> int:
        return min(tokens, self.o.step_max_tokens) if self.o.step_max_tokens else tokens

    # ------------------------------------------------------------------ Deep Retrieval

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
        Table 12 scores.
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
            else:
                prompt = render("agent_salience", task=self.task, passages=[user_view(p) for p in cands], n=n)
                step.llm(prompt, [])
                reply, comps = await complete_json(
                    self.backend, prompt.messages, salience_reply_model(n),
                    max_tokens=self._cap(SALIENCE_TOKENS_PER_PASSAGE * n + 40), seed=self.env.seed,
                )
                step.llm(None, comps)
                scores = [SalienceScore(relevance=s.relevance, signal=s.signal) for s in reply.scores]
            self.evidence = select(cands, scores, self.o.retain_at, self.o.max_passages)
            fallback = None
            if cands and not self.evidence and self.o.reranker == "llm":
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

    # ------------------------------------------------------------------ Broad Thinking & Deep Alignment

    async def compact_evidence(self) -> CompactEvidence:
        """The informative moments of the retained passages, dated (LLM; or the user's cue lines)."""
        passages = self.evidence
        with self.trace.step("compact_evidence", {"passages": [p.chunk_id for p in passages], "mode": self.o.compact}) as step:
            if not passages:
                self.compacted = CompactEvidence(items=[])
            elif self.o.compact == "rules":
                self.compacted = _rule_compact(passages)
            else:
                prompt = render("agent_compact", task=self.task, passages=[p.text for p in passages])
                step.llm(prompt, [])
                self.compacted, comps = await complete_json(
                    self.backend, prompt.messages, CompactEvidence, max_tokens=self._cap(COMPACT_TOKENS), seed=self.env.seed
                )
                step.llm(None, comps)
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
                prompt = render("agent_extract", task=self.task, evidence=evidence)
                step.llm(prompt, [])
                extracted, comps = await complete_json(
                    self.backend, prompt.messages, ExtractedPreferences, max_tokens=self._cap(EXTRACT_TOKENS), seed=self.env.seed
                )
                step.llm(None, comps)
            self.preferences = resolve_latest(extracted.preferences)
            step.outputs = {"extracted": extracted, "resolved": self.preferences}
        return self.preferences

    async def align_plan(self) -> AlignmentPlan:
        """Style/structure/constraints for text; a value per slot for API calls."""
        prefs = self.preferences or await self.extract_preferences()
        lines = preference_lines(prefs)
        options = schema_terms(self.task.api_schema)
        with self.trace.step("align_plan", {"preferences": lines}) as step:
            prompt = render("agent_align", task=self.task, preferences=lines, options=options)
            step.llm(prompt, [])
            self.plan, comps = await complete_json(
                self.backend, prompt.messages, AlignmentPlan, max_tokens=self._cap(ALIGN_TOKENS), seed=self.env.seed
            )
            step.llm(None, comps)
            step.outputs = self.plan
        return self.plan

    async def broad_thinking(self) -> AlignmentPlan:
        await self.compact_evidence()
        await self.extract_preferences()
        return await self.align_plan()

    # ------------------------------------------------------------------ synthesis

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
                prompt = render(
                    "agent_synthesize", task=self.task, plan=self.plan.lines() if self.plan else [],
                    preferences=prefs, passages=raw, schema=schema, instructions=instructions,
                )
            result = await answer(self.backend, prompt, self.task, step, seed=self.env.seed, max_tokens=self.o.max_tokens)
            step.outputs = result
        return result


def _rule_compact(passages: list[Passage], limit: int = 8) -> CompactEvidence:
    """The user's lines that carry a Table 12 cue (else each passage's first user line), dated."""
    items: list[EvidenceItem] = []
    for p in passages:
        said = [(m.group(1), m.group(2)) for line in p.text.splitlines() if (m := _USER_LINE.match(line))]
        cued = [x for x in said if signal_type(x[1]) != "none"] or said[:1]
        items.extend(EvidenceItem(date=date, quote=text[:160]) for date, text in cued if text.strip())
    return CompactEvidence(items=items[:limit])
