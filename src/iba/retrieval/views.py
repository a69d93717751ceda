"""Evidence views: what a step's prompt shows of the user's history.

A view never cuts a turn at a fixed width and never keeps lines by their position. Under a token
budget it shows *whole* user turns, chosen by relevance (the salience of the passage that found
them, the turn's own Table 12 signal, and its similarity to the task or to one API parameter),
and lists them oldest first with their dates. Only a turn too long for what is left of the budget
is shown in part: its most relevant whole sentences, with `CUT` where words were left out. A
retrieval window that starts or ends inside a turn is shown with `CUT` at that edge
(`passage_text`), so a reader (model or person) can tell a quote from a fragment.

Why: on a capable model the score is decided by whether the clause that reveals a preference
reaches, whole, the prompt of the step that decides (iba.eval.reach). Views that cut every line
at 160 or 240 characters, or kept a passage's first line, lost it for most slots (issue 26).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from iba.retrieval.passage import Passage
from iba.retrieval.salience import SIGNAL_POINTS, text_signal
from iba.retrieval.vector import one_blas_thread
from iba.types import Turn

CUT = "\u2026"  # marks words a view left out of a turn
_PREFIX = re.compile(r"^\[(\d{4}-\d{2}-\d{2}) (user|assistant)\] ")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
# weights of a turn's relevance: the finding passage's salience (0-10, scaled to 0-1), the turn's own
# Table 12 signal (0-4, scaled to 0-1) and its cosine similarity to the nearest query. Chosen on the
# tuning sample (seed 101, unit=mixed, k=10) by reach at 4k tokens, slots / checkpoints: similarity
# weight 1: 0.749 / 0.768, 2: 0.802 / 0.798, 4: 0.850 / 0.844, 8: 0.874 / 0.854 (bench/BENCHMARKS.md,
# issue 26): the turn's own nearness to the task decides, salience and signal break near-ties
SALIENCE_WEIGHT = 1.0
SIGNAL_WEIGHT = 0.5
SIMILARITY_WEIGHT = 8.0

Count = Callable[[str], int]
LINE_COST = 2  # tokens a listed line costs beyond its text: the list marker and the line break


def whole(turn: Turn) -> str:
    """A turn's words with its spacing normalised, as every view and index renders them."""
    return " ".join(turn.text.split())


def passage_text(p: Passage, turns: Mapping[str, Turn]) -> str:
    """The passage's text with each turn it holds only in part marked: `CUT` where a retrieval window
    started or ended inside the turn. Lines of turns not in `turns`, and notes, are left as they are."""
    out = []
    for i, line in enumerate(p.text.splitlines()):
        m = _PREFIX.match(line)
        turn = turns.get(p.turn_ids[i]) if m and i < len(p.turn_ids) else None
        if m and turn is not None:
            body, full = line[m.end():], whole(turn)
            if body and body != full:
                head = "" if full.startswith(body) else CUT + " "
                tail = "" if full.endswith(body) else " " + CUT
                line = m.group(0) + head + body + tail
        out.append(line)
    return "\n".join(out)


_USER_LINE = re.compile(r"^\[\d{4}-\d{2}-\d{2} user\] ")
REPEAT_NOTE = "(the user said the same again on"  # iba.retrieval.deep's note on folded repeats


def user_view(p: Passage, turns: Mapping[str, Turn]) -> str:
    """A passage as the user's own dated lines and its repeat notes (what Table 12 scores), with cut
    turns marked; the whole marked text when it has no user line."""
    text = passage_text(p, turns)
    lines = [line for line in text.splitlines() if _USER_LINE.match(line) or line.startswith(REPEAT_NOTE)]
    return "\n".join(lines) or text


@dataclass
class ViewItem:
    """One user turn a view may show, with what its relevance is made of."""

    turn_id: str
    date: str  # YYYY-MM-DD
    text: str  # the whole turn (normalised spacing)
    salience: float  # of the best passage that found it, 0-10
    signal: int  # Table 12 points of the turn's own words, 0-4
    similarity: float = 0.0  # cosine to the nearest query
    again: list[str] = field(default_factory=list)  # other dates the user said exactly this

    @property
    def relevance(self) -> float:
        return SALIENCE_WEIGHT * self.salience / 10 + SIGNAL_WEIGHT * self.signal / 4 + SIMILARITY_WEIGHT * self.similarity

    def line(self, text: str | None = None) -> str:
        note = f" (said again on {', '.join(self.again)})" if self.again else ""
        return f"{self.date} | {self.text if text is None else text}{note}"


def user_turns(passages: Sequence[Passage], turns: Mapping[str, Turn]) -> list[ViewItem]:
    """The user turns of the passages (best passage first), each once; a turn said again word for
    word is one item with the other dates. Repeat-folded turns count as their passage's."""
    items: dict[str, ViewItem] = {}
    seen: set[str] = set()
    for p in passages:
        for tid in p.turn_ids:
            t = turns.get(tid)
            if t is None or t.role != "user" or tid in seen:
                continue
            seen.add(tid)
            text = whole(t)
            if not text:
                continue
            key = hashlib.sha256(text.lower().encode()).hexdigest()
            have = items.get(key)
            if have is not None:
                have.again.append(t.timestamp[:10])
                continue
            items[key] = ViewItem(tid, t.timestamp[:10], text, salience=p.score, signal=SIGNAL_POINTS[text_signal(text)])
    for it in items.values():
        it.again = sorted(set(it.again) - {it.date})
    return list(items.values())


def with_similarity(items: list[ViewItem], queries: Sequence[str], encode: Callable[[list[str]], np.ndarray] | None) -> list[ViewItem]:
    """Each item's cosine similarity to the nearest query (items unchanged without an encoder or queries)."""
    if encode is None or not queries or not items:
        return items
    # a user turn is embedded as the turn index embeds it ("user: words"), so its vector is usually stored already
    vecs = encode(list(queries) + [f"user: {it.text}" for it in items])
    with one_blas_thread():
        sims = (vecs[len(queries):] @ vecs[: len(queries)].T).max(axis=1)
    return [ViewItem(it.turn_id, it.date, it.text, it.salience, it.signal, float(s), list(it.again)) for it, s in zip(items, sims)]


@dataclass
class View:
    lines: list[str]  # "date | text", oldest first
    turn_ids: list[str]  # shown, whole or in part
    cut: list[str]  # turn ids shown in part (marked with CUT)
    tokens: int  # what the lines cost
    left_out: int  # items that did not fit


def fit(items: Sequence[ViewItem], budget: int, count: Count) -> View:
    """The most relevant items whose lines fit in `budget` tokens, oldest first. A turn too long for
    what is left is shown as its most relevant whole sentences that fit, with CUT marks; one that no
    sentence of fits is left out."""
    chosen: list[tuple[ViewItem, str]] = []
    cut: list[str] = []
    used = 0
    ranked = sorted(items, key=lambda it: -it.relevance)  # stable: ties keep the passages' order
    for it in ranked:
        line = it.line()
        cost = count(line) + LINE_COST
        if used + cost <= budget:
            chosen.append((it, line))
            used += cost
            continue
        part = _clauses(it, budget - used, count)
        if part is not None:
            chosen.append((it, part))
            used += count(part) + LINE_COST
            cut.append(it.turn_id)
    chosen.sort(key=lambda x: (x[0].date, x[0].turn_id))
    return View([line for _, line in chosen], [it.turn_id for it, _ in chosen], cut, used, len(items) - len(chosen))


def _clauses(it: ViewItem, room: int, count: Count) -> str | None:
    """The item's sentences that carry its signal first, then the longer ones, whole, within `room`
    tokens, in their order, with CUT where sentences were left out; None if none fits."""
    sents = [s for s in _SENTENCE.split(it.text) if s]
    if len(sents) < 2:
        return None
    order = sorted(range(len(sents)), key=lambda i: (-SIGNAL_POINTS[text_signal(sents[i])], -len(sents[i])))
    keep: set[int] = set()
    for i in order:
        trial = keep | {i}
        if count(it.line(_join(sents, trial))) + LINE_COST <= room:
            keep = trial
    return it.line(_join(sents, keep)) if keep else None


def _join(sents: list[str], keep: set[int]) -> str:
    out: list[str] = []
    for i, s in enumerate(sents):
        if i in keep:
            out.append(s)
        elif not out or out[-1] != CUT:
            out.append(CUT)
    return " ".join(out)


def evidence_view(
    passages: Sequence[Passage], turns: Mapping[str, Turn], budget: int, count: Count,
    queries: Sequence[str] = (), encode: Callable[[list[str]], np.ndarray] | None = None,
) -> View:
    """The whole user turns of `passages` (ranked by Deep Retrieval, best first) that fit `budget`
    tokens, most relevant to `queries` first, listed oldest first."""
    return fit(with_similarity(user_turns(passages, turns), queries, encode), max(0, budget), count)
