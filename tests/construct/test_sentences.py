"""The sentence budget, and the bound it keeps: no long sentence recurs more than 3 times in a history."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from iba.construct.sentences import LONG, MAX_REPEATS, SentenceBudget, long_sentences, sentences


def test_sentences_split_at_end_marks():
    assert sentences('Hi. How are you? Fine! "Quoted." Done') == ["Hi.", "How are you?", "Fine!", '"Quoted."', "Done"]
    assert long_sentences("Short one. " + "x" * (LONG + 1) + ".") == ("x" * (LONG + 1) + ".",)
    assert long_sentences("A  Mixed   CASE sentence that is long enough.") == ("a mixed case sentence that is long enough.",)


def test_budget_bounds_long_sentences_and_ignores_short_ones():
    b = SentenceBudget(limit=2)
    long = "This sentence is certainly longer than the limit."
    assert b.fits(long)
    b.use(long)
    b.use(f"Ok. {long}")
    assert not b.fits(long) and not b.fits(f"Prefix. {long}")
    assert b.fits("Ok.") and b.fits("Short again.")  # short sentences recur freely
    assert not SentenceBudget(limit=1).fits(f"{long} {long}")  # a repeat inside one text counts twice


def test_take_picks_a_fitting_option_or_the_fallback():
    b = SentenceBudget(limit=1)
    rng = random.Random(0)
    options = ["First long option sentence, well over the limit.", "Second long option sentence, also over it."]
    got = {b.take(rng, options) for _ in range(2)}
    assert got == set(options)
    assert b.take(rng, options) is None
    assert b.take(rng, options, fallback="Short.") == "Short."


@pytest.mark.parametrize("which", ["demo_dir", "small_dir"])
def test_no_long_sentence_recurs_more_than_three_times_in_a_history(which, request):
    import json

    root = request.getfixturevalue(which)
    worst = 0
    for path in sorted((root / "histories").glob("*.jsonl")):
        counts: Counter[str] = Counter()
        for line in path.read_text(encoding="utf-8").splitlines():
            counts.update(long_sentences(json.loads(line)["text"]))
        top = counts.most_common(1)
        assert not top or top[0][1] <= MAX_REPEATS, (path.name, top)
        worst = max(worst, top[0][1] if top else 0)
    assert worst >= 1


def test_sentences_split_exactly_where_an_end_mark_meets_white_space():
    """The splitter against its definition, written the slow way (a look-behind at every position)."""
    import re

    split = re.compile(r"(?<=[.!?])\s+|(?<=[.!?][\"')\]])\s+")
    rng = random.Random(7)
    alphabet = 'ab .!?"\')]\n\t\u00a0x'
    for _ in range(20_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(16)))
        assert sentences(text) == [s.strip() for s in split.split(text.strip()) if s.strip()], repr(text)
