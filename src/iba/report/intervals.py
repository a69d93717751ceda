"""Uncertainty for agent comparisons: bootstrap confidence intervals and paired tests.

Agents are compared on the same instances, so the honest test is paired: resample instances,
not scores of each agent separately. Everything is seeded (a report is reproducible) and uses
numpy only; the tests check the arithmetic against scipy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

N_BOOT = 2000
LEVEL = 0.95


@dataclass(frozen=True)
class Interval:
    mean: float
    lo: float
    hi: float
    n: int

    def __str__(self) -> str:
        return f"{100 * self.mean:.1f} [{100 * self.lo:.1f}, {100 * self.hi:.1f}]"


def bootstrap_ci(values: Sequence[float], *, n_boot: int = N_BOOT, level: float = LEVEL, seed: int = 0) -> Interval | None:
    """Percentile bootstrap interval of the mean; None for no values."""
    x = np.asarray(list(values), dtype=float)
    if x.size == 0:
        return None
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, x.size, size=(n_boot, x.size))].mean(axis=1)
    alpha = (1 - level) / 2
    lo, hi = np.quantile(means, [alpha, 1 - alpha])
    return Interval(float(x.mean()), float(lo), float(hi), int(x.size))


@dataclass(frozen=True)
class Paired:
    diff: Interval  # mean of a - b with its paired bootstrap interval
    wins: int  # instances where a > b
    losses: int  # instances where a < b
    ties: int
    p_sign: float  # two-sided exact sign test over the untied instances (1.0 when all tie)
    p_boot: float  # two-sided paired bootstrap p: how often the resampled difference crosses 0


def sign_test(wins: int, losses: int) -> float:
    """Two-sided exact binomial test of wins vs losses at p = 1/2 (ties dropped beforehand)."""
    n = wins + losses
    if n == 0:
        return 1.0
    k = min(wins, losses)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def paired(a: Sequence[float], b: Sequence[float], *, n_boot: int = N_BOOT, level: float = LEVEL,
           seed: int = 0) -> Paired | None:
    """Compare two agents' scores on the same instances (a[i] and b[i] are one instance)."""
    if len(a) != len(b):
        raise ValueError(f"paired scores need the same instances: {len(a)} vs {len(b)}")
    if not a:
        return None
    d = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, d.size, size=(n_boot, d.size))].mean(axis=1)
    alpha = (1 - level) / 2
    lo, hi = np.quantile(means, [alpha, 1 - alpha])
    if np.all(d == 0):
        p_boot = 1.0
    else:
        p_boot = float(min(1.0, 2 * min((means <= 0).mean(), (means >= 0).mean())))
    wins, losses = int((d > 0).sum()), int((d < 0).sum())
    return Paired(Interval(float(d.mean()), float(lo), float(hi), int(d.size)), wins, losses,
                  int(d.size) - wins - losses, sign_test(wins, losses), p_boot)
