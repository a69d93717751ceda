"""Deep Retrieval (paper section 4): the model-free parts and their offline composition.

    task query + 5 facet sub-queries (Table 3) [+ one per API choice parameter, one per value, the
    LLM's state queries: optional, off]
    -> similarity retrieval (top-k each)
    -> relevance feedback (the best candidates' cue lines as queries, top-2 each; our addition:
       users repeat themselves across sessions, and the gold evidence often sits in those repeats)
    -> candidate pool -> redundancy filtering (content hash, high overlap; repeats are folded in)
    -> salience re-ranking (Table 12, keep >= 5, at most 10 passages); our addition: relevance
       moved by scenario contrast (nearer the task's scenario name than the other scenarios' names)
    -> repeats across the history (our addition): a cue-bearing sentence of a kept passage that the
       user said again elsewhere folds those turns in, with their dates ("said the same again on")

One pipeline, `DeepRetrieval`, runs these steps for `iba eval-retrieval` and for the agents (`iba`,
`iba-fc`, whose tools are its stages), with the same options (`DeepOptions`, the agents' spec names)
and defaults. Expansion and scoring plug in: the template queries and the rule scorer are the
model-free defaults; the agents pass their LLM expansion and LLM salience scorer. `deep_retrieve`
is the synchronous model-free shortcut.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import re
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any, Literal, Protocol

import numpy as np
from pydantic import Field

from iba.retrieval.bm25 import top_k
from iba.retrieval.expansion import FacetQueries, template_queries
from iba.retrieval.index import HistoryIndex
from iba.retrieval.passage import Method, Passage
from iba.retrieval.salience import MAX_PASSAGES, MAX_RELEVANCE, RETAIN_AT, SalienceScore, rule_scores, select, signal_type, user_lines
from iba.retrieval.views import REPEAT_NOTE
from iba.types import Strict, TaskView

# per-query depth and search of Deep Retrieval. The paper (C.3) uses top-3 by dense similarity;
# with the small offline MiniLM, hybrid (dense + BM25 fused by RRF) finds clearly more evidence
# (iba eval-retrieval); `k=3, method="dense"` reproduces the paper's setting. 20 per query: the
# evidence views fill a prompt budget from the whole pool, and a deeper pool reaches more gold at
# 8k tokens (k 10 / 20: slots 0.892 / 0.922, checkpoints 0.874 / 0.897 on the tuning sample, issue 26)
DEEP_K = 20
DEEP_METHOD: Method = "hybrid"
OVERLAP_DROP = 0.8  # a passage sharing >= 80% of its words with a kept one adds nothing new
FEEDBACK_K = 2  # passages per relevance-feedback query
REPEAT_MIN_WORDS = 6  # shorter sentences ("thanks so much for that") repeat by chance
MAX_REPEATS = 12  # turns folded into one passage by history-wide repeat search
REPEAT_MEMO = 4096  # probes whose repeating turns one history's sentence index remembers
CUE_SCAN_K = 10  # cue-bearing passages added by the signal-first scan
# relevance points per pool sd of scenario contrast; 1, 2 and 3 measured on seed 101 (tuning, slot queries on):
# Deep R@10 0.627 / 0.637 / 0.635 against 0.604 without (bench/BENCHMARKS.md, session 7)
CONTRAST_WEIGHT = 2.0


class CandidatePool(Strict):
    """Passages found by any query, in fused order, with what the rule scorer needs."""

    passages: list[Passage]
    best_ranks: list[int]  # best 1-based rank over the queries that found each passage
    hits: list[int]  # how many queries found it


class DeepResult(Strict):
    queries: FacetQueries
    candidates: list[Passage]  # after redundancy filtering, in fused order
    dropped: list[str] = Field(default_factory=list)  # chunk ids removed as redundant
    scores: list[SalienceScore]  # one per scored candidate
    passages: list[Passage]  # retained, best first; Passage.score is the salience
    ranked: list[Passage] = Field(default_factory=list)  # retained, then the other candidates by salience


def labelled_queries(task: TaskView, queries: FacetQueries, slots: bool = False, values: bool = False) -> list[tuple[str, str]]:
    """The task text first ("task"), then one query per facet, then (with `slots`) one per choice
    parameter of an API task, then (with `values`) one per allowed value of each, then the LLM's state
    queries ("state") when it wrote any."""
    return [("task", task.query), *queries.items(), *extra_queries(task, queries, slots, values)]


def extra_queries(task: TaskView, queries: FacetQueries, slots: bool = False, values: bool = False) -> list[tuple[str, str]]:
    """The queries searched beside the facets: slot, value and state queries."""
    return [*(slot_queries(task) if slots else []), *(value_queries(task) if values else []),
            *(("state", q) for q in queries.states)]


def slot_queries(task: TaskView) -> list[tuple[str, str]]:
    """One query ("slot") per enum parameter of the task's API schema: its description and options.

    The facet queries put every parameter into one long "decision" query, where a single choice
    ("Kind of lodging: hotel, apartment, ...") is diluted by the others; its own query finds the
    turn in which the user settled it. Public schema text only, as the facet queries."""
    out = []
    for name, prop in ((task.api_schema or {}).get("properties") or {}).items():
        if prop.get("enum"):
            opts = ", ".join(str(v).replace("_", " ") for v in prop["enum"])
            out.append(("slot", f"{prop.get('description') or name.replace('_', ' ')} {opts}"))
    return out


def value_queries(task: TaskView) -> list[tuple[str, str]]:
    """One query ("value") per allowed value of each enum parameter of the task's API schema: the
    parameter's description and that one value.

    The user who settled a choice talks about what they chose (a bunk on a night train, not the
    list of travel modes), and a query that names every option is as near to each as to none;
    one value per query lets similarity find the turns about that value. Public schema text only."""
    out = []
    for name, prop in ((task.api_schema or {}).get("properties") or {}).items():
        about = prop.get("description") or name.replace("_", " ")
        values = prop.get("enum") or ()
        if values and all(isinstance(v, bool) for v in values):  # yes or no: the question is the query
            out.append(("value", about))
            continue
        out.extend(("value", f"{about} {str(v).replace('_', ' ')}") for v in values)
    return out


def merge_rankings(rankings: Sequence[tuple[str, Sequence[Passage]]]) -> CandidatePool:
    """Each passage once, ordered by best rank, then by how many queries found it, then first seen."""
    seen: dict[str, int] = {}
    passages: list[Passage] = []
    best: list[int] = []
    hits: list[int] = []
    order: list[tuple[int, int]] = []
    for qi, (label, found) in enumerate(rankings):
        for rank, p in enumerate(found, start=1):
            if p.chunk_id in seen:
                i = seen[p.chunk_id]
                best[i] = min(best[i], rank)
                hits[i] += 1
                if label not in passages[i].facets:
                    passages[i].facets.append(label)
                continue
            seen[p.chunk_id] = len(passages)
            passages.append(p.model_copy(update={"facets": [label]}))
            best.append(rank)
            hits.append(1)
            order.append((rank, qi))
    ranked = sorted(range(len(passages)), key=lambda i: (best[i], -hits[i], order[i]))
    return CandidatePool(
        passages=[passages[i] for i in ranked], best_ranks=[best[i] for i in ranked], hits=[hits[i] for i in ranked]
    )


def feedback_queries(pool: CandidatePool, top: int = 4, limit: int = 5) -> list[tuple[str, str]]:
    """Relevance feedback: the cue-bearing user lines of the best candidates, as new queries.

    Users repeat and revise themselves across sessions; searching with what they said in the best
    passages finds the other sessions where they said it again (or changed it), which a query
    written from the task alone misses.
    """
    queries: list[tuple[str, str]] = []
    seen: set[str] = set()
    for p in pool.passages[:top]:
        for line in user_lines(p.text):
            key = content_hash(line)
            if signal_type(line) == "none" or key in seen or len(line.split()) < 4:
                continue
            seen.add(key)
            queries.append(("feedback", line))
    return queries[:limit]


def _words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


def content_hash(text: str) -> str:
    """Hash of the normalised text (case, spacing and the date prefixes do not count)."""
    body = re.sub(r"\[[^\]]*\] ?", "", text)
    return hashlib.sha256(" ".join(body.lower().split()).encode()).hexdigest()[:16]


def filter_redundant(pool: CandidatePool, overlap: float = OVERLAP_DROP) -> tuple[CandidatePool, list[str]]:
    """Drop passages whose content hash repeats, or whose words are >= `overlap` covered by a kept one.

    A dropped passage's lines that repeat a line of the passage it duplicates are folded into that
    passage: their turn ids join it and a note gives the dates ("the user said this again on ..."),
    since a statement repeated over time is evidence of a habit and its latest date matters.
    """
    kept: list[Passage] = []
    ranks: list[int] = []
    hits: list[int] = []
    hashes: list[str] = []
    words: list[set[str]] = []
    dropped: list[str] = []
    for p, rank, hit in zip(pool.passages, pool.best_ranks, pool.hits):
        h = content_hash(p.text)
        w = _words(p.text)
        n = len(w)
        # |w & v| <= |v|: a kept passage with too few words to cover `overlap` of w needs no intersection
        # (the same comparison, so the same result; it skips most pairs of a window and a turn unit)
        dup = next(
            (j for j in range(len(kept))
             if hashes[j] == h or (n and len(words[j]) / n >= overlap and len(w & words[j]) / n >= overlap)), None
        )
        if dup is None:
            kept.append(p.model_copy(deep=True))
            ranks.append(rank)
            hits.append(hit)
            hashes.append(h)
            words.append(w)
            continue
        dropped.append(p.chunk_id)
        kept[dup] = _fold_repeats(kept[dup], p, overlap)
        hits[dup] += hit
    return CandidatePool(passages=kept, best_ranks=ranks, hits=hits), dropped


_PREFIX = re.compile(r"^\[[^\]]*\] ?")


def _user_line_texts(p: Passage) -> list[tuple[str, str, str]]:
    """(text without prefix, turn id, timestamp) of each user line; a chunk's lines are its turns, in order."""
    lines = [line for line in p.text.splitlines() if not line.startswith(REPEAT_NOTE)]
    if len(lines) > len(p.turn_ids):
        return []
    out = []
    for line, t, ts in zip(lines, p.turn_ids, p.timestamps):
        prefix = _PREFIX.match(line)
        if prefix is None or " user]" in prefix.group(0):
            out.append((_PREFIX.sub("", line), t, ts))
    return out


def _user_line_turns(p: Passage) -> list[tuple[set[str], str, str]]:
    """(words, turn id, timestamp) of each user line."""
    return [(_words(text), t, ts) for text, t, ts in _user_line_texts(p)]


def _sentences(text: str) -> list[set[str]]:
    """Word sets of the sentences long enough that a repeat is not chance."""
    out = [_words(s) for s in re.split(r"(?<=[.!?])\s+", text)]
    return [w for w in out if len(w) >= REPEAT_MIN_WORDS]


class _SentenceIndex:
    """The user's sentences over the whole history, with an inverted index from word to sentence.

    A window may start inside a turn, so a turn's sentences are the union over its chunks. Turns
    keep their first-seen (chunk) order, which is the order repeats are folded in."""

    def __init__(self, index: HistoryIndex) -> None:
        table: dict[str, tuple[str, list[set[str]]]] = {}
        for i in range(len(index)):
            for text, t, ts in _user_line_texts(index.passage(i, 0.0)):
                _, have = table.setdefault(t, (ts, []))
                have.extend(w for w in _sentences(text) if w not in have)
        self.rank = {t: r for r, t in enumerate(table)}
        self.timestamp = {t: ts for t, (ts, _) in table.items()}
        self.turn_of: list[str] = []
        self.words: list[set[str]] = []  # each sentence's words
        self.postings: dict[str, list[int]] = {}
        for t, (_, sents) in table.items():
            for words in sents:
                for w in words:
                    self.postings.setdefault(w, []).append(len(self.turn_of))
                self.turn_of.append(t)
                self.words.append(words)
        self._found: dict[tuple[frozenset[str], float], frozenset[str]] = {}

    def repeating(self, probe: set[str], overlap: float) -> frozenset[str]:
        """Turns with a sentence containing >= `overlap` of the probe's words.

        A qualifying sentence lacks at most size - need of the probe's words, so it holds one of any
        size - need + 1 of them: only the postings of the rarest are read (common words post to most
        sentences), and each candidate's share is counted exactly. Remembered per probe: an agent's
        steps and a user's tasks fold the same passages again."""
        key = (frozenset(probe), overlap)
        found = self._found.get(key)
        if found is None:
            size = len(probe)
            need = next((n for n in range(size + 1) if n / size >= overlap), size + 1)
            rare = sorted(probe, key=lambda w: (len(self.postings.get(w, ())), w))[: max(0, size - need + 1)]
            candidates = {sid for w in rare for sid in self.postings.get(w, ())}
            found = frozenset(self.turn_of[sid] for sid in candidates if len(probe & self.words[sid]) / size >= overlap)
            if len(self._found) >= REPEAT_MEMO:
                self._found.clear()
            self._found[key] = found
        return found


def fold_history_repeats(index: HistoryIndex, passages: Sequence[Passage], overlap: float = OVERLAP_DROP) -> list[Passage]:
    """Fold in the turns, anywhere in the history, where the user repeated a cue-bearing sentence of a passage.

    A preference said again and again over months is Table 12's implicit pattern; the retrieved
    passage shows it once and the note gives every date, so the later steps see the habit and its
    latest mention without spending ten passage slots on copies. Only sentences of lines that carry
    a preference cue are followed (small talk repeats too), at most MAX_REPEATS turns per passage.
    """
    sentences = index.derived("user_sentences", lambda: _SentenceIndex(index))
    out: list[Passage] = []
    taken: set[str] = {t for p in passages for t in p.turn_ids}
    for p in passages:
        probes = [w for text, _, _ in _user_line_texts(p) if signal_type(text) != "none" for w in _sentences(text)]
        found = set().union(*(sentences.repeating(probe, overlap) for probe in probes)) - taken
        repeats = sorted(found, key=sentences.rank.__getitem__)[:MAX_REPEATS]
        taken.update(repeats)
        if not repeats:
            out.append(p)
            continue
        dates = ", ".join(sorted({sentences.timestamp[t][:10] for t in repeats}))
        out.append(p.model_copy(update={
            "turn_ids": p.turn_ids + repeats,
            "timestamps": p.timestamps + [sentences.timestamp[t] for t in repeats],
            "text": p.text + f"\n{REPEAT_NOTE} {dates})",
        }))
    return out


def _fold_repeats(keeper: Passage, dup: Passage, overlap: float = OVERLAP_DROP) -> Passage:
    """Fold the user lines of `dup` that repeat (>= `overlap` of their words) a user line of `keeper`."""
    have = [w for w, _, _ in _user_line_turns(keeper) if w]
    repeats = [
        (t, ts)
        for w, t, ts in _user_line_turns(dup)
        if w and t not in keeper.turn_ids and any(len(w & k) / len(w) >= overlap for k in have)
    ]
    if not repeats:
        return keeper
    dates = ", ".join(sorted({ts[:10] for _, ts in repeats}))
    return keeper.model_copy(
        update={
            "turn_ids": keeper.turn_ids + [t for t, _ in repeats],
            "timestamps": keeper.timestamps + [ts for _, ts in repeats],
            "text": keeper.text + f"\n{REPEAT_NOTE} {dates})",
            "facets": keeper.facets + [f for f in dup.facets if f not in keeper.facets],
        }
    )


def cue_chunks(index: HistoryIndex) -> list[int]:
    """Indices of the chunks in which the user's own words carry a Table 12 cue (cached on the index)."""
    return index.derived("cue_chunks", lambda: [i for i, c in enumerate(index.chunks) if signal_type(c.text) != "none"])


def cue_scan(index: HistoryIndex, queries: Sequence[str], k: int = CUE_SCAN_K) -> list[Passage]:
    """Signal-first retrieval: among the chunks where the user voiced a preference (Table 12 cues),
    the k most similar to any of the queries.

    In a long history almost every chunk is small talk; a preference statement that shares no words
    with the task is outranked by chatter on similarity alone, but among the few hundred passages
    where the user corrected, complained, stated or repeated something it stands out.
    """
    cues = cue_chunks(index)
    if not cues or not queries:
        return []
    scores = index.dense_scores(list(queries))[:, cues].max(axis=0)
    return [index.passage(cues[j], float(scores[j]), "cue_scan") for j in top_k(scores, k)]


def scenario_contrast(index: HistoryIndex, passages: Sequence[Passage], scenario: str, scenarios: Sequence[str]) -> np.ndarray | None:
    """Per passage: its similarity to the task's scenario name minus its best similarity to any other
    scenario's name (None when there are fewer than two others to contrast with).

    A long history holds the user's preferences for every scenario; a correction about commuting
    shares cue words and dense similarity with a parking task, but it sits nearer "Commute route
    planning" than "Parking". The names are public (the tasks' own), not the builder's wording.
    """
    others = [s for s in dict.fromkeys(scenarios) if s != scenario]
    if len(others) < 2 or not passages:
        return None
    pos = index.derived("chunk_pos", lambda: {c.id: i for i, c in enumerate(index.chunks)})
    sims = index.dense_scores([scenario, *others])[:, [pos[p.chunk_id] for p in passages]]
    return sims[0] - sims[1:].max(axis=0)


def contrast_scores(scores: Sequence[SalienceScore], contrast: np.ndarray, weight: float) -> list[SalienceScore]:
    """Relevance moved by up to +-2 points: `weight` points per standard deviation of the pool's contrast
    above or below its median (the pool's own scale: similarities differ between embedders)."""
    sd = float(contrast.std())
    if sd == 0 or weight == 0:
        return list(scores)
    shift = np.clip(np.rint(weight * (contrast - np.median(contrast)) / sd), -2, 2).astype(int)
    return [
        s.model_copy(update={"relevance": int(min(MAX_RELEVANCE, max(0, s.relevance + d)))}) for s, d in zip(scores, shift)
    ]




# --------------------------------------------------------------------------- the pipeline


class DeepOptions(Strict):
    """Deep Retrieval's options: the same names (and defaults) in an agent spec (`iba?k=3&scan=false`)
    and in `iba eval-retrieval` (`--k 3 --no-scan`)."""

    # facet queries: written by the LLM (one call) or from templates (no model)
    expansion: Literal["llm", "template"] = "llm"
    # llm: the candidates scored in one call; each: one call per candidate (the naive scorer, for the
    # effort comparison); rules: Table 12 by rules, no call
    reranker: Literal["llm", "each", "rules"] = "llm"
    # passages per query and search: the paper's C.3 is top-3 dense (k=3&method=dense); see DEEP_K
    k: int = Field(DEEP_K, ge=1)
    method: Method = DEEP_METHOD
    feedback: bool = True  # relevance-feedback search with the best candidates' cue lines
    scan: bool = True  # signal-first scan: cue-bearing passages most similar to the queries
    repeats: bool = True  # fold in the turns where the user repeated a kept passage's cue sentence
    slots: bool = False  # one more query per API choice parameter (`slot_queries`)
    values: bool = False  # one more query per allowed value of each API choice parameter (`value_queries`)
    # one LLM call more: 3-6 first-person sentences about the person's circumstances that would bear on
    # the task (iba.retrieval.llm_expansion.llm_state_queries), searched like the facets (beside the LLM's
    # or the templates') and ranking the views beside them
    states: bool = False
    # move each candidate's relevance by how much nearer it is to the task's scenario name than to
    # the benchmark's other scenario names (3 or more; `CONTRAST_WEIGHT` points per pool sd)
    contrast: bool = False
    max_candidates: int = Field(15, ge=1)  # passages an LLM scorer sees (its prompt budget); rules see all
    max_passages: int = Field(MAX_PASSAGES, ge=1)
    retain_at: int = Field(RETAIN_AT, ge=0, le=10)


class StepLike(Protocol):
    outputs: Any

    def llm(self, prompt: Any, completions: Sequence[Any]) -> None: ...


class Tracer(Protocol):
    def step(self, name: str, inputs: Any = None) -> contextlib.AbstractContextManager[StepLike]: ...


class _Quiet:
    """A step record that records nothing (eval-retrieval has no trace)."""

    outputs: Any = None

    def llm(self, prompt: Any, completions: Sequence[Any]) -> None:
        pass


class NoTrace:
    @contextlib.contextmanager
    def step(self, name: str, inputs: Any = None) -> Iterator[StepLike]:
        yield _Quiet()


# expansion: (task, step) -> facet queries; states: (task, step) -> state queries; scoring:
# (candidates, pool, step) -> one score each
Expander = Callable[[TaskView, StepLike], Awaitable[FacetQueries]]
StateWriter = Callable[[TaskView, StepLike], Awaitable[list[str]]]
Scorer = Callable[[list[Passage], CandidatePool, StepLike], Awaitable[list[SalienceScore]]]


def brief(p: Passage) -> dict[str, Any]:
    return {"chunk_id": p.chunk_id, "turn_ids": p.turn_ids, "score": round(p.score, 4), "facets": p.facets}


class DeepRetrieval:
    """Deep Retrieval over one task's history index; each stage is a traced step, callable alone
    (the iba-fc controller calls them as tools) or in order (`run`).

    index: an async callable that loads the history index (the agents load it off the event loop).
    expand / score: the LLM plug-ins; None = template queries / the rule scorer.
    states: the LLM's state queries (`states=true`), a step after the expansion; None = none.
    scenarios: the benchmark's public scenario names, for `contrast`."""

    def __init__(
        self, task: TaskView, opts: DeepOptions, index: Callable[[], Awaitable[HistoryIndex]], *,
        expand: Expander | None = None, score: Scorer | None = None, scenarios: Sequence[str] = (),
        trace: Tracer | None = None, states: StateWriter | None = None,
    ) -> None:
        self.task, self.o, self._index = task, opts, index
        self._expand, self._score, self._states = expand, score, states
        self.scenarios = tuple(scenarios)
        self.trace: Tracer = trace or NoTrace()
        self.rankings: list[tuple[str, list[Passage]]] = []
        self.queries: FacetQueries | None = None
        self.pool: CandidatePool | None = None
        self.dropped: list[str] = []
        self.scores: list[SalienceScore] = []
        self.evidence: list[Passage] = []  # kept, best first; Passage.score is the salience
        self.ranked: list[Passage] = []  # kept first, then the other candidates by salience (the views' source)

    async def search(self, query: str | None = None, k: int | None = None, label: str = "task",
                     method: Method | None = None) -> list[Passage]:
        """Top-k passages for a query (the task text by default); they join the candidate pool."""
        index = await self._index()
        query, k, method = query or self.task.query, k or self.o.k, method or self.o.method
        with self.trace.step("similarity_retrieve", {"query": query, "k": k, "method": method}) as step:
            found = await asyncio.to_thread(index.search, query, k, method)
            self.rankings.append((label, found))
            step.outputs = [brief(p) for p in found]
        return found

    async def expand(self) -> FacetQueries:
        """The five facet sub-queries of Table 3 (the expansion plug-in, else the templates), and the
        state queries when asked for and a writer is plugged in."""
        mode = "template" if self._expand is None else self.o.expansion
        with self.trace.step("expand_queries", {"query": self.task.query, "mode": mode}) as step:
            self.queries = template_queries(self.task) if self._expand is None else await self._expand(self.task, step)
            step.outputs = self.queries
        if self._states is not None and self.o.states:
            with self.trace.step("state_queries", {"query": self.task.query}) as step:
                found = await self._states(self.task, step)
                self.queries = self.queries.model_copy(update={"states": found})
                step.outputs = found
        return self.queries

    def _labelled(self) -> list[tuple[str, str]]:
        if not self.queries:
            return [("task", self.task.query)]
        return labelled_queries(self.task, self.queries, slots=self.o.slots, values=self.o.values)

    def view_queries(self) -> list[str]:
        """What the evidence views rank a turn by (its nearest one): the task with its scenario's name,
        then every query the pool was searched with (facets, and the slot and value queries when on)."""
        return [f"{self.task.scenario_name}: {self.task.query}", *(q for label, q in self._labelled() if label != "task")]

    async def search_facets(self) -> list[Passage]:
        """Top-k passages for each facet sub-query (and slot query), in one batch; they join the pool."""
        index = await self._index()
        queries = self.queries or await self.expand()
        extra = extra_queries(self.task, queries, self.o.slots, self.o.values)
        labelled = [*queries.items(), *extra]
        with self.trace.step("facet_retrieve", {"queries": queries, "slot_queries": [q for lbl, q in extra if lbl != "state"],
                                                "k": self.o.k, "method": self.o.method}) as step:
            results = await asyncio.to_thread(index.search_many, [q for _, q in labelled], self.o.k, self.o.method)
            self.rankings += [(label, found) for (label, _), found in zip(labelled, results)]
            new = [p for found in results for p in found]
            step.outputs = {label: [p.chunk_id for p in found] for (label, _), found in zip(labelled, results)}
        return new

    async def scan_cues(self) -> list[Passage]:
        """Signal-first scan: among passages where the user voiced a preference (Table 12 cues), the
        ones most similar to the task and facet queries; they join the pool as one more ranking."""
        index = await self._index()
        texts = [q for _, q in self._labelled()]
        with self.trace.step("cue_scan", {"queries": texts, "k": CUE_SCAN_K}) as step:
            found = await asyncio.to_thread(cue_scan, index, texts)
            self.rankings.append(("cue_scan", found))
            step.outputs = [p.chunk_id for p in found]
        return found

    async def feedback(self) -> list[Passage]:
        """Relevance feedback: search again with the cue-bearing user lines of the best candidates."""
        index = await self._index()
        queries = feedback_queries(merge_rankings(self.rankings))
        with self.trace.step("feedback_retrieve", {"queries": [q for _, q in queries], "k": FEEDBACK_K}) as step:
            results = await asyncio.to_thread(index.search_many, [q for _, q in queries], FEEDBACK_K, self.o.method) if queries else []
            self.rankings += [(label, found) for (label, _), found in zip(queries, results)]
            new = [p for found in results for p in found]
            step.outputs = [[p.chunk_id for p in found] for found in results]
        return new

    def filter(self) -> CandidatePool:
        """Merge everything retrieved so far; drop repeats by content hash and high word overlap."""
        with self.trace.step("filter_redundant", {"rankings": [[lbl, [p.chunk_id for p in ps]] for lbl, ps in self.rankings]}) as step:
            self.pool, self.dropped = filter_redundant(merge_rankings(self.rankings))
            step.outputs = {"candidates": [p.chunk_id for p in self.pool.passages], "dropped": self.dropped}
        return self.pool

    async def rerank(self) -> list[Passage]:
        """Salience 0-10 per Table 12 (relevance 0-6 + signal 0-4), moved by scenario contrast when on;
        keep >= retain_at, at most max_passages; fold in the history-wide repeats of the kept ones.

        The rule scorer sees every candidate; an LLM scorer the first `max_candidates` in fused order.
        An LLM scorer that keeps nothing would leave the later steps blind: the rules decide then."""
        pool = self.pool or self.filter()
        llm = self._score is not None
        n = min(len(pool.passages), self.o.max_candidates) if llm else len(pool.passages)
        cands = pool.passages[:n]
        mode = self.o.reranker if llm else "rules"
        with self.trace.step("rerank_salience", {"candidates": [p.chunk_id for p in cands], "mode": mode,
                                                 "retain_at": self.o.retain_at, "contrast": self.o.contrast}) as step:
            scores = (await self._score(cands, pool, step) if llm else rule_scores(cands, pool.best_ranks[:n], pool.hits[:n])) if cands else []
            scores = await self._contrast(cands, scores)
            self.evidence = select(cands, scores, self.o.retain_at, self.o.max_passages)
            fallback = None
            if cands and not self.evidence and llm:
                fallback = "rules"
                scores = await self._contrast(cands, rule_scores(cands, pool.best_ranks[:n], pool.hits[:n]))
                self.evidence = select(cands, scores, self.o.retain_at, self.o.max_passages)
            if self.o.repeats and self.evidence:
                index = await self._index()
                self.evidence = await asyncio.to_thread(fold_history_repeats, index, self.evidence)
            self.scores = scores
            kept = {p.chunk_id for p in self.evidence}
            rest = sorted((i for i, p in enumerate(cands) if p.chunk_id not in kept), key=lambda i: (-scores[i].total, i))
            # the views' source: the kept passages, the other scored ones, then those an LLM scorer did not
            # see (salience 0, fused order): a view picks turns by their own relevance within its budget
            self.ranked = (self.evidence + [cands[i].model_copy(update={"score": float(scores[i].total)}) for i in rest]
                           + [p.model_copy(update={"score": 0.0}) for p in pool.passages[n:]])
            step.outputs = {
                "fallback": fallback,
                "scores": {p.chunk_id: s.total for p, s in zip(cands, scores)},
                "unscored": [p.chunk_id for p in pool.passages[n:]],
                "retained": [brief(p) for p in self.evidence],
            }
        return self.evidence

    async def _contrast(self, cands: list[Passage], scores: list[SalienceScore]) -> list[SalienceScore]:
        if not self.o.contrast or not cands:
            return scores
        index = await self._index()
        contrast = await asyncio.to_thread(scenario_contrast, index, cands, self.task.scenario_name, self.scenarios)
        return scores if contrast is None else contrast_scores(scores, contrast, CONTRAST_WEIGHT)

    async def widen(self) -> list[Passage]:
        """Expansion and the searches it drives: facets, [cue scan], [feedback]; the passages they found."""
        await self.expand()
        found = await self.search_facets()
        if self.o.scan:
            found += await self.scan_cues()
        if self.o.feedback:
            found += await self.feedback()
        return found

    async def narrow(self) -> list[Passage]:
        """Filter and rerank all that was found (the task searched first if nothing was yet)."""
        if not self.rankings:
            await self.search()
        self.filter()
        return await self.rerank()

    async def run(self) -> list[Passage]:
        """Every stage in order: task search, expansion, facet search, [cue scan], [feedback], filter, rerank."""
        await self.search()
        await self.widen()
        return await self.narrow()

    def result(self) -> DeepResult:
        assert self.queries is not None and self.pool is not None, "run() first"
        return DeepResult(queries=self.queries, candidates=self.pool.passages, dropped=self.dropped,
                          scores=self.scores, passages=self.evidence, ranked=self.ranked)


MODEL_FREE = DeepOptions(expansion="template", reranker="rules")


def deep_retrieve(index: HistoryIndex, task: TaskView, opts: DeepOptions = MODEL_FREE,
                  queries: FacetQueries | None = None, scenarios: Sequence[str] = ()) -> DeepResult:
    """Deep Retrieval without an LLM (template queries unless `queries` are given, the rule scorer),
    synchronously: the `iba?expansion=template&reranker=rules` agent's retrieval, step for step."""

    async def load() -> HistoryIndex:
        return index

    async def given(task: TaskView, step: StepLike) -> FacetQueries:
        return queries  # type: ignore[return-value]

    pipeline = DeepRetrieval(task, opts, load, expand=given if queries else None, scenarios=scenarios)
    asyncio.run(pipeline.run())
    return pipeline.result()
