"""Reciprocal rank fusion (Cormack et al. 2009): score(d) = sum over rankings of 1 / (k + rank(d))."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

RRF_K = 60  # the constant from the RRF paper; damps the weight of the very top ranks


def rrf(rankings: Sequence[Sequence[Hashable]], k: int = RRF_K) -> list[tuple[Hashable, float]]:
    """Fuse rankings (best first) into one, best first; ties keep first-seen order."""
    scores: dict[Hashable, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
    order = {item: i for i, item in enumerate(scores)}
    return sorted(scores.items(), key=lambda kv: (-kv[1], order[kv[0]]))
