"""Sentences of a history and a bound on how often one recurs.

A real history does not say the same long sentence dozens of times, and dense retrieval over
hundreds of identical sentences measures nothing real. The procedural writer therefore draws every
piece of text through a `SentenceBudget` kept per history: a sentence longer than `LONG` characters
may occur at most `MAX_REPEATS` times in one history. Short sentences ("Thanks!", "Got it.") recur
freely, as they do in life.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from typing import TypeVar

LONG = 25  # characters: longer sentences are bounded
MAX_REPEATS = 3

T = TypeVar("T")
# a sentence ends at . ! or ? (optionally closed by a quote or bracket) followed by white space;
# the end is captured and put back (a pattern that starts with the end mark is several times
# faster than one that looks behind every position)
_SPLIT = re.compile(r"([.!?][\"')\]]?)\s+")


def sentences(text: str) -> list[str]:
    """The sentences of `text` (a simple splitter: end marks followed by white space)."""
    parts = _SPLIT.split(text.strip())
    parts.append("")  # the last piece has no end captured
    out = []
    for i in range(0, len(parts) - 1, 2):
        s = (parts[i] + parts[i + 1]).strip()
        if s:
            out.append(s)
    return out


@lru_cache(maxsize=1 << 16)
def long_sentences(text: str) -> tuple[str, ...]:
    """The sentences of `text` that the budget bounds, normalised for counting (cached: the writer
    checks the same candidate texts many times)."""
    return tuple(" ".join(s.lower().split()) for s in sentences(text) if len(s) > LONG)


class SentenceBudget:
    """Counts of the long sentences used so far in one history."""

    def __init__(self, limit: int = MAX_REPEATS) -> None:
        self.limit = limit
        self.counts: Counter[str] = Counter()

    def fits(self, *texts: str) -> bool:
        """Whether all of `texts` together can still be used (a sentence repeated inside them counts twice)."""
        # the writer asks this millions of times: one text, counts read with dict.get (a Counter's
        # missing key costs a Python __missing__ call)
        found = long_sentences(texts[0]) if len(texts) == 1 else tuple(s for t in texts for s in long_sentences(t))
        get, limit = self.counts.get, self.limit
        if len(found) < 2:
            return not found or get(found[0], 0) < limit
        if len(found) == len(set(found)):  # the common case, without building a Counter
            return all(get(s, 0) < limit for s in found)
        return all(get(s, 0) + n <= limit for s, n in Counter(found).items())

    def use(self, *texts: str) -> None:
        counts = self.counts
        for t in texts:
            for s in long_sentences(t):
                counts[s] = counts.get(s, 0) + 1

    def take(self, rng: random.Random, options: Sequence[T], render: Callable[[T], str] = str, fallback: T | None = None) -> T | None:
        """A random option whose rendering fits, marked used; tried in a random order. If none fits,
        `fallback` (marked used, unchecked: pass one with only short sentences) or None."""
        order = list(range(len(options)))
        rng.shuffle(order)
        for i in order:
            text = render(options[i])
            if self.fits(text):
                self.use(text)
                return options[i]
        if fallback is not None:
            self.use(render(fallback))
        return fallback

    def first_fitting(self, candidates: Iterable[str]) -> str | None:
        """The first candidate text that fits, marked used (for candidates already in a chosen order)."""
        for text in candidates:
            if self.fits(text):
                self.use(text)
                return text
        return None
