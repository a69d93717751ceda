"""Evidence views: whole turns by relevance within a budget; any cut is marked."""

from __future__ import annotations

import re

from iba.llm.base import approx_tokens
from iba.retrieval.chunking import token_chunks
from iba.retrieval.passage import Passage
from iba.retrieval.views import CUT, ViewItem, evidence_view, fit, passage_text, user_turns, user_view
from tests.retrieval.helpers import make_history, word_spans

LONG = ("I keep telling you this. " * 6 + "Actually, make every report start with a one-line summary, no exceptions. "
        + "The weather was nice today. " * 6)
HISTORY = make_history([
    ("user", "Hello there, how are you doing today?"),
    ("assistant", "Fine, thanks."),
    ("user", LONG),
    ("assistant", "Noted, summary first."),
    ("user", "I hate spicy food, no chili at all please."),
    ("assistant", "Noted."),
])
TURNS = {t.id: t for t in HISTORY}
WHOLE = {" ".join(t.text.split()) for t in HISTORY}


def _passages(size: int = 40, overlap: int = 5) -> list[Passage]:
    return [Passage(chunk_id=c.id, text=c.text, turn_ids=c.turn_ids, timestamps=c.timestamps, score=5.0)
            for c in token_chunks(HISTORY, word_spans, size, overlap)]


def _bodies(text: str) -> list[str]:
    return [re.sub(r"^\[[^\]]*\] ", "", line) for line in text.splitlines() if line.startswith("[")]


def test_a_window_cut_inside_a_turn_is_marked_where_it_was_cut():
    passages = _passages()
    assert any(b not in WHOLE for p in passages for b in _bodies(p.text))  # windows do cut turns
    for p in passages:
        for body in _bodies(passage_text(p, TURNS)) + _bodies(user_view(p, TURNS)):
            assert body in WHOLE or CUT in body, body  # no partial turn unless it says so
            if CUT in body:
                core = body.replace(CUT, "").strip()
                assert any(core in w for w in WHOLE)
    starts = [b for p in passages for b in _bodies(passage_text(p, TURNS)) if b.startswith(CUT)]
    ends = [b for p in passages for b in _bodies(passage_text(p, TURNS)) if b.endswith(CUT)]
    assert starts and ends


def test_views_show_whole_turns_most_relevant_first_and_list_them_oldest_first():
    items = user_turns(_passages(), TURNS)
    assert {it.text for it in items} == {w for w in WHOLE if w.startswith(("Hello", "I keep", "I hate"))}
    view = fit(items, 10_000, approx_tokens)
    assert [line.split(" | ", 1)[1] for line in view.lines] == [it.text for it in sorted(items, key=lambda i: i.date)]
    assert view.cut == [] and view.left_out == 0
    # a budget for one short turn: the most relevant one (the complaint, Table 12 signal 3), whole
    spicy = next(it for it in items if "spicy" in it.text)
    view = fit(items, approx_tokens(spicy.line()) + 3, approx_tokens)
    assert view.lines == [spicy.line()] and view.left_out == 2


def test_a_turn_too_long_for_the_budget_is_shown_as_whole_sentences_with_the_cut_marked():
    item = ViewItem("t", "2025-01-01", " ".join(LONG.split()), salience=10, signal=4)
    view = fit([item], 40, approx_tokens)
    assert view.cut == ["t"] and len(view.lines) == 1
    text = view.lines[0].split(" | ", 1)[1]
    assert "Actually, make every report start with a one-line summary, no exceptions." in text  # the signal sentence
    assert CUT in text and approx_tokens(view.lines[0]) <= 40
    for part in text.split(CUT):  # what is shown is whole sentences of the turn
        assert part.strip() == "" or part.strip() in item.text


def test_budget_zero_shows_nothing_and_similarity_breaks_ties():
    assert evidence_view(_passages(), TURNS, 0, approx_tokens).lines == []
    items = [ViewItem("a", "2025-01-01", "alpha words", 5, 0), ViewItem("b", "2025-01-02", "beta words", 5, 0)]

    def encode(texts):
        import numpy as np
        return np.array([[1.0, 0.0] if "beta" in t or t == "q" else [0.0, 1.0] for t in texts])

    from iba.retrieval.views import with_similarity
    ranked = with_similarity(items, ["q"], encode)
    view = fit(ranked, approx_tokens(items[1].line()) + 2, approx_tokens)
    assert view.turn_ids == ["b"]
