"""The shipped noise topics: well-formed, varied, informative, and free of preference talk."""

from __future__ import annotations

import re
from collections import Counter

import pytest
from pydantic import ValidationError

from iba.construct.noise_topics import MIN_COUNTS, NoiseTopic, load_noise_topics

FIELDS = tuple(MIN_COUNTS)
# first-person preference phrasing: noise must not state likes, dislikes, habits or choices
PREFERENCE = re.compile(
    r"\b(I|I'm|I've|we)\s+(really\s+|just\s+|much\s+)?(prefer|love|adore|hate|dislike|like|loathe|can't stand|always|never|usually|"
    r"tend to|rather|avoid|enjoy)\b|\bmy (favou?rite|go-to|usual)\b|\bI'd (much )?rather\b|\bfan of\b",
    re.IGNORECASE,
)


def _sentences():
    for t in load_noise_topics():
        for field in FIELDS:
            for k, s in enumerate(getattr(t, field)):
                yield t, field, k, s


def test_topics_are_many_and_of_both_kinds():
    topics = load_noise_topics()
    kinds = Counter(t.kind for t in topics)
    assert len(topics) >= 200, len(topics)
    assert kinds["help"] >= 0.35 * len(topics) and kinds["chat"] >= 0.35 * len(topics), kinds
    assert len({t.topic.lower() for t in topics}) == len(topics), "two topics share a noun phrase"


def test_every_sentence_is_plain_text_of_a_sensible_length():
    bad = []
    for t, field, k, s in _sentences():
        if "{" in s or "}" in s or s != " ".join(s.split()):
            bad.append((t.id, field, k, "placeholder or stray whitespace"))
        lo, hi = (15, 240) if field == "openers" else (26, 240)
        if not lo <= len(s) <= hi:
            bad.append((t.id, field, k, f"{len(s)} characters, want {lo}..{hi}"))
        if field == "questions" and not s.rstrip().endswith("?"):
            bad.append((t.id, field, k, "a question ends with ?"))
    assert not bad, bad[:20]


def test_no_sentence_is_written_twice():
    seen: dict[str, tuple[str, str]] = {}
    dup = []
    for t, field, _, s in _sentences():
        key = " ".join(s.lower().split())
        if key in seen:
            dup.append((t.id, field, seen[key], s))
        seen[key] = (t.id, field)
    assert not dup, dup[:20]


def test_noise_states_no_preference():
    hits = [(t.id, field, s) for t, field, _, s in _sentences() if PREFERENCE.search(s)]
    assert not hits, hits[:20]


def test_answer_pairs_are_checked():
    """The v3 pairs must give one fact index (or -1) per question / opener."""
    t = load_noise_topics()[0].model_dump()
    with pytest.raises(ValidationError, match="answers has 2 entries for 5 questions"):
        NoiseTopic.model_validate({**t, "answers": [0, 1]})
    with pytest.raises(ValidationError, match=r"opener_answers: \[99\] is not a fact index"):
        NoiseTopic.model_validate({**t, "opener_answers": [99, -1, -1]})
    assert NoiseTopic.model_validate({**t, "answers": None}).answers is None  # v2 data without pairs still loads
