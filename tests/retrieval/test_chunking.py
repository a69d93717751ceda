import pytest

from iba.retrieval.chunking import make_units, session_units, token_chunks, turn_line, turn_units
from tests.retrieval.helpers import make_history, word_spans


def _history(n_turns: int = 40, words: int = 37):
    return make_history(
        [("user" if i % 2 == 0 else "assistant", " ".join(f"w{i}x{j}" for j in range(words))) for i in range(n_turns)]
    )


def test_token_chunks_respect_size_and_overlap():
    history = _history()
    chunks = token_chunks(history, word_spans, size=256, overlap=50)
    assert len(chunks) > 3
    for c in chunks:
        assert len(word_spans(c.text)) <= 256
    # consecutive windows share 50 stream tokens; a stream token is a body word or one of the 2 words
    # of a "[date role]" line prefix, so with 39-token lines the shared body words number 46-50
    body = lambda c: [w for w in c.text.split() if w.startswith("w")]  # noqa: E731
    for a, b in zip(chunks, chunks[1:]):
        ba, bb = body(a), body(b)
        shared = [w for w in bb if w in set(ba)]
        assert shared == bb[: len(shared)] == ba[len(ba) - len(shared) :]
        assert 46 <= len(shared) <= 50, len(shared)


def test_every_turn_is_covered_in_order_with_timestamps():
    history = _history()
    chunks = token_chunks(history, word_spans, size=256, overlap=50)
    covered = [t for c in chunks for t in c.turn_ids]
    assert set(covered) == {t.id for t in history}
    by_id = {t.id: t for t in history}
    for c in chunks:
        assert c.timestamps == [by_id[t].timestamp for t in c.turn_ids]
        ids = [t.id for t in history]
        assert [ids.index(t) for t in c.turn_ids] == sorted(ids.index(t) for t in c.turn_ids)


def test_chunk_text_keeps_date_and_role_prefixes_even_mid_turn():
    history = _history(n_turns=6, words=200)  # turns longer than the overlap: windows start mid-turn
    chunks = token_chunks(history, word_spans, size=256, overlap=50)
    for c in chunks:
        assert c.text.startswith("[2025-"), c.text[:40]
        first = next(t for t in history if t.id == c.turn_ids[0])
        assert c.text.startswith(f"[{first.timestamp[:10]} {first.role}]")


def test_real_tokenizer_counts(minilm):
    history = _history(n_turns=30, words=25)
    chunks = token_chunks(history, minilm.token_spans, size=256, overlap=50)
    for c in chunks:
        assert len(minilm.token_spans(c.text)) <= 256
    assert {t for c in chunks for t in c.turn_ids} == {t.id for t in history}


def test_turn_and_session_units():
    history = _history(n_turns=10, words=5)
    turns = turn_units(history)
    assert [c.turn_ids for c in turns] == [[t.id] for t in history]
    assert turns[3].text == turn_line(history[3])
    sessions = session_units(history)
    assert [len(c.turn_ids) for c in sessions] == [4, 4, 2]
    with pytest.raises(ValueError, match="unknown chunk unit"):
        make_units(history, "paragraph", word_spans)  # type: ignore[arg-type]


def test_bad_overlap_rejected():
    with pytest.raises(ValueError, match="overlap"):
        token_chunks(_history(4), word_spans, size=50, overlap=50)


def test_single_long_turn_overlaps_exactly_50():
    history = make_history([("user", " ".join(f"w{j}" for j in range(700)))])
    chunks = token_chunks(history, word_spans, size=256, overlap=50)
    bodies = [c.text.split()[2:] for c in chunks]  # every window repeats the 2-word prefix
    assert [len(word_spans(c.text)) for c in chunks[:-1]] == [256] * (len(chunks) - 1)
    for a, b in zip(bodies, bodies[1:]):
        assert a[-50:] == b[:50]
    assert bodies[-1][-1] == "w699"
