"""Recall@k of gold evidence turns for each retrieval method on a built dataset.

Gold for an instance = the non-superseded evidence turn ids of its answer key (evidence of a
preference's old value is not something the agent must find). A method's ranked passages cover
turns; recall@k = |gold ∩ turns of the first k passages| / |gold|, averaged over instances that
have gold evidence. `dense_top3` with the task text alone is also the benchmark's validity check:
if plain similarity search found the evidence, the benchmark would not test implicit alignment.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from iba.retrieval.deep import MODEL_FREE, DeepOptions, deep_retrieve
from iba.retrieval.expansion import FacetQueries
from iba.retrieval.index import HistoryIndex
from iba.retrieval.passage import Passage
from iba.types import AnswerKey, TaskView

METHODS = ("dense_top3", "bm25", "hybrid", "deep")
KS = (3, 10)


def sample_users(instances: list, n: int, seed: int) -> list:
    """The instances of `n` users drawn with `seed`, in dataset order."""
    users = sorted({t.user_id for t in instances})
    chosen = set(random.Random(seed).sample(users, min(n, len(users))))
    return [t for t in instances if t.user_id in chosen]


def gold_turns(key: AnswerKey) -> set[str]:
    gold = {e.turn_id for e in key.evidence if not e.superseded}
    if not gold and not key.evidence:  # a key without labels: fall back to checkpoint/slot evidence
        gold = {t for c in key.checkpoints for t in c.evidence} | {t for s in key.slots for t in s.evidence}
    return gold


def recall_at(passages: Sequence[Passage], gold: set[str], k: int) -> float:
    covered = {t for p in passages[:k] for t in p.turn_ids}
    return len(gold & covered) / len(gold)


def ranked_lists(
    index: HistoryIndex, task: TaskView, opts: DeepOptions = MODEL_FREE, queries: FacetQueries | None = None,
    scenarios: Sequence[str] = (),
) -> dict[str, list[Passage]]:
    """Each method's ranking for one task (10 deep enough for recall@10); `deep` is Deep Retrieval's
    kept passages (the pipeline the agents run, with `opts`)."""
    depth = max(KS)
    return {
        "dense_top3": index.search(task.query, depth, "dense"),
        "bm25": index.search(task.query, depth, "bm25"),
        "hybrid": index.search(task.query, depth, "hybrid"),
        "deep": deep_retrieve(index, task, opts, queries=queries, scenarios=scenarios).passages,
    }


class RecallTable:
    """Accumulates per-instance recalls per method."""

    def __init__(self) -> None:
        self.values: dict[str, dict[int, list[float]]] = {m: {k: [] for k in KS} for m in METHODS}

    def add(self, rankings: dict[str, list[Passage]], gold: set[str]) -> None:
        for m in METHODS:
            for k in KS:
                self.values[m][k].append(recall_at(rankings[m], gold, k))

    def summary(self) -> dict[str, dict[str, float | int]]:
        out: dict[str, dict[str, float | int]] = {}
        for m in METHODS:
            n = len(self.values[m][3])
            out[m] = {
                f"recall@{k}": round(sum(self.values[m][k]) / n, 4) if n else 0.0 for k in KS
            } | {"instances": n}
        return out

