"""The paper's Table 2 histograms: how many evidence items and constraints an instance has.

Counts of task instances by the number of evidence items (1, 2, 3, 4, 5+) and of preference
constraints (1, 2, 3, 4, 5+) per domain, copied from Table 2 of the IBA-Bench paper. The builder
draws each instance's counts from its domain's row, so the built dataset follows the paper's
shape. Domains the table does not know fall back to the Overall row.
"""

from __future__ import annotations

import random

BINS: tuple[str, ...] = ("1", "2", "3", "4", "5+")

# Table 2, "# Evidence" columns (1, 2, 3, 4, 5+), per domain id (ids as in iba.taxonomy.PAPER_DOMAINS).
EVIDENCE_HIST: dict[str, tuple[int, int, int, int, int]] = {
    "writing": (271, 267, 83, 61, 68),
    "work": (394, 380, 165, 111, 105),
    "daily": (511, 290, 217, 36, 32),
    "planning": (532, 329, 182, 42, 66),
    "health": (325, 247, 113, 41, 55),
    "transportation": (288, 117, 112, 0, 1),
    "medical": (290, 113, 121, 0, 0),
    "leisure": (137, 104, 62, 16, 14),
    "information": (293, 217, 94, 29, 31),
    "overall": (3041, 2064, 1149, 336, 372),
}

# Table 2, "# Constraints" columns (1, 2, 3, 4, 5+), per domain id.
CONSTRAINTS_HIST: dict[str, tuple[int, int, int, int, int]] = {
    "writing": (66, 199, 282, 160, 43),
    "work": (30, 161, 338, 321, 305),
    "daily": (46, 182, 401, 276, 181),
    "planning": (41, 206, 489, 386, 29),
    "health": (11, 54, 173, 252, 291),
    "transportation": (21, 67, 169, 197, 64),
    "medical": (18, 90, 231, 185, 0),
    "leisure": (12, 60, 148, 113, 0),
    "information": (23, 73, 185, 161, 222),
    "overall": (268, 1092, 2416, 2051, 1135),
}

# How far past 5 a "5+" draw goes: the table does not say, we use 5, 6 or 7 with falling weight.
_FIVE_PLUS = (5, 6, 7)
_FIVE_PLUS_WEIGHTS = (0.6, 0.3, 0.1)


def bin_of(n: int) -> str:
    """The Table 2 column of a count (0 counts as "1": every instance has at least one)."""
    return "5+" if n >= 5 else str(max(n, 1))


def empty_hist() -> dict[str, int]:
    return {b: 0 for b in BINS}


def scaled_counts(rng: random.Random, hist: tuple[int, ...], n: int) -> list[int]:
    """How many of `n` instances fall in each bin: the row scaled to `n`, remainders rounded at random
    (weighted by their fractional parts), so small datasets still follow the row on average."""
    total = sum(hist)
    exact = [n * h / total for h in hist]
    counts = [int(x) for x in exact]
    fractions = [x - int(x) for x in exact]
    for _ in range(n - sum(counts)):
        b = rng.choices(range(len(hist)), weights=[f if f > 0 else 1e-9 for f in fractions], k=1)[0]
        counts[b] += 1
        fractions[b] = 0.0
    return counts


def allocate(
    rng: random.Random, hist: tuple[int, ...], caps: list[int | None], mins: list[int] | None = None
) -> list[int]:
    """Counts for instances with the given maxima (None: unbounded) and minima, following `hist`.

    Bins are filled from "5+" down, each with instances whose cap allows it, chosen at random
    after the instances whose minimum requires that bin; taking the largest counts first is what
    lets every bin be filled whenever any assignment could fill it (the eligible sets are nested).
    A bin without enough eligible instances passes its shortfall to the next smaller bin. A count
    below an instance's minimum is raised to it (the only departure from the row).
    """
    n = len(caps)
    lows = mins or [1] * n
    quota = scaled_counts(rng, hist, n)
    result = [0] * n
    free = list(range(n))
    carry = 0
    for b in reversed(range(len(BINS))):
        need = quota[b] + carry
        low = b + 1
        eligible = [i for i in free if caps[i] is None or caps[i] >= low]  # type: ignore[operator]
        forced = [i for i in eligible if lows[i] >= low]
        rest = [i for i in eligible if lows[i] < low]
        take = forced[:need] + rng.sample(rest, max(0, min(need - len(forced), len(rest))))
        carry = need - len(take)
        for i in take:
            result[i] = max(lows[i], low if b < 4 else _five_plus(rng, caps[i]))
        chosen = set(take)
        free = [i for i in free if i not in chosen]
    for i in free:  # only instances with cap < 1
        result[i] = max(1, lows[i])
    return result


def _five_plus(rng: random.Random, cap: int | None) -> int:
    options = [(n, w) for n, w in zip(_FIVE_PLUS, _FIVE_PLUS_WEIGHTS) if cap is None or n <= cap]
    return rng.choices([n for n, _ in options], weights=[w for _, w in options], k=1)[0]


def row(table: dict[str, tuple[int, int, int, int, int]], domain: str) -> tuple[int, int, int, int, int]:
    return table.get(domain, table["overall"])
