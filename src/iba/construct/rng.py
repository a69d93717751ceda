"""Seeded random streams, one per named part of the build.

Every persona, instance and session draws from its own `random.Random` derived from the build
seed and a key path, so a change in one part (one more persona, a different noise ratio) does
not shift the random draws of every other part, and nothing touches the global RNG. Seeding
`random.Random` with a str hashes it with SHA-512, which is independent of PYTHONHASHSEED.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from functools import cache

# The fixed origin of all timestamps: histories start at EPOCH plus a seeded offset per persona,
# so no dataset depends on the wall clock.
EPOCH = datetime(2025, 1, 6, tzinfo=timezone.utc)


def derive(seed: int, *keys: object) -> random.Random:
    """A random stream for `keys` under `seed` (same seed and keys -> same stream)."""
    return random.Random(":".join([str(seed), *map(str, keys)]))


def weighted_choice(rng: random.Random, items: list, weights: list[float]):
    """One item drawn with the given weights (zero weights are never drawn)."""
    return rng.choices(items, weights=weights, k=1)[0]


class ChangingWeights:
    """Integer weights that change one at a time, drawn from as `rng.choices(range(n),
    weights=...)` draws (the same index for the same state of the stream: one `random()` times
    the total, then the first index whose running sum exceeds it), in O(log n) instead of
    summing every weight again for each draw (a Fenwick tree)."""

    def __init__(self, weights: list[int]) -> None:
        self.n = len(weights)
        self.weights = list(weights)
        self.total = sum(weights)
        self.tree = [0] * (self.n + 1)
        for i, w in enumerate(weights, 1):
            self.tree[i] += w
            up = i + (i & -i)
            if up <= self.n:
                self.tree[up] += self.tree[i]

    def set(self, i: int, weight: int) -> None:
        delta = weight - self.weights[i]
        self.weights[i] = weight
        self.total += delta
        i += 1
        while i <= self.n:
            self.tree[i] += delta
            i += i & -i

    def draw(self, rng: random.Random) -> int:
        """The drawn index (the total must be positive, as for rng.choices)."""
        x = rng.random() * (self.total + 0.0)
        pos = acc = 0
        step = 1 << self.n.bit_length()
        while step:
            nxt = pos + step
            if nxt <= self.n and acc + self.tree[nxt] <= x:  # int vs float: compared exactly
                pos = nxt
                acc += self.tree[nxt]
            step >>= 1
        return min(pos, self.n - 1)  # rng.choices bisects below n - 1: x may round up to the total


def iso(dt: datetime) -> str:
    return dt.isoformat(timespec="seconds")


@cache
def _clock() -> tuple[str, ...]:
    """"HH:MM:SS" of every second of a day (formatting ~2 million of them one by one cost seconds)."""
    return tuple(f"{c // 3600:02d}:{c // 60 % 60:02d}:{c % 60:02d}" for c in range(86400))


def iso_after(start: datetime, offsets: Sequence[int]) -> list[str]:
    """iso(start + offset seconds) for each offset: from the start's clock time while the day lasts
    (the same text, without a datetime object per turn: the full build has ~2 million)."""
    head = iso(start)
    clock = start.hour * 3600 + start.minute * 60 + start.second
    if start.microsecond or len(head) < 19:  # not the shape below: the general way
        return [iso(start + timedelta(seconds=o)) for o in offsets]
    day, zone, hms = head[:11], head[19:], _clock()
    return [f"{day}{hms[clock + o]}{zone}" if 0 <= clock + o < 86400 else iso(start + timedelta(seconds=o)) for o in offsets]
