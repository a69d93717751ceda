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


def _encode_by_word(texts):
    """A toy encoder: one axis per keyword, so a query is near exactly the turns that name its word."""
    import numpy as np
    words = ("alpha", "beta", "gamma")
    vecs = np.array([[1.0 if w in t else 0.0 for w in words] + [0.1] for t in texts])
    return vecs / np.linalg.norm(vecs, axis=1, keepdims=True)


def test_each_query_takes_its_turn_so_a_narrow_query_is_heard():
    from iba.retrieval.views import each_query_in_turn, similarities
    # three turns near the broad query "alpha", one near the narrow "beta"
    items = [ViewItem(f"a{i}", f"2025-01-0{i + 1}", f"alpha note {i}", 5, 0) for i in range(3)]
    items.append(ViewItem("b", "2025-01-09", "beta choice", 5, 0))
    queries = ["alpha", "beta"]
    sims = similarities(items, queries, _encode_by_word)
    order = [it.turn_id for it in each_query_in_turn(items, sims)]
    assert order[:2] == ["a0", "b"] and sorted(order) == sorted(it.turn_id for it in items)
    one_line = approx_tokens(items[0].line()) + 2
    # room for two lines: by the nearest query both would be alpha's (ties keep the passages' order)
    passages = [Passage(chunk_id=f"p{i}", text=f"[{it.date} user] {it.text}", turn_ids=[it.turn_id], timestamps=[it.date],
                        score=5.0) for i, it in enumerate(items)]
    turns = {it.turn_id: make_history([("user", it.text)])[0].model_copy(update={"id": it.turn_id, "timestamp": it.date})
             for it in items}
    nearest = evidence_view(passages, turns, 2 * one_line, approx_tokens, queries, _encode_by_word)
    each = evidence_view(passages, turns, 2 * one_line, approx_tokens, queries, _encode_by_word, order="each")
    assert "b" not in nearest.turn_ids and "b" in each.turn_ids and len(each.turn_ids) == 2


def test_the_latest_turns_come_first_within_their_share():
    from iba.retrieval.views import latest_first
    history = make_history([("user", "gamma old remark"), ("assistant", "ok"), ("user", "alpha relevant preference"),
                            ("user", "beta newest aside"), ("user", "gamma newer aside")])
    turns = {t.id: t for t in history}
    newest_first = list(reversed(history))
    one = approx_tokens(f"{history[-1].timestamp[:10]} | {history[-1].text}") + 2
    assert [it.text for it in latest_first(newest_first, 2 * one, approx_tokens)] == ["gamma newer aside", "beta newest aside"]
    assert latest_first(newest_first, one - 1, approx_tokens) == []
    passages = [Passage(chunk_id="p", text=f"[{history[2].timestamp[:10]} user] {history[2].text}", turn_ids=[history[2].id],
                        timestamps=[history[2].timestamp], score=8.0)]
    plain = evidence_view(passages, turns, 3 * one, approx_tokens, ["alpha"], _encode_by_word)
    assert plain.turn_ids == [history[2].id]
    view = evidence_view(passages, turns, 3 * one, approx_tokens, ["alpha"], _encode_by_word, latest=newest_first, latest_budget=one)
    # the newest turn, then the relevant one; listed oldest first
    assert view.turn_ids == [history[2].id, history[-1].id]
