"""How stored ScoreRecords combine into one instance score: the rule every report uses.

Kept in one place so that tables, plots and the HTML page cannot disagree.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from iba.eval.panel import JUDGE_PREFIX, judge_scorer, panel_score
from iba.types import AnswerKey, ScoreRecord


def task_kind(records: Iterable[ScoreRecord], key: AnswerKey | None = None) -> str:
    """'call_api' or 'generate' for a task run: from the answer key when known, else from the
    scorers present (a "slots" record means a call_api task)."""
    if key is not None:
        return "call_api" if key.slots else "generate"
    return "call_api" if any(r.scorer == "slots" for r in records) else "generate"


def instance_score(kind: str, records: Iterable[ScoreRecord], judges: Iterable[str] | None = None) -> float | None:
    """The score in [0, 1] of one task run (one instance, one trial), or None if unscored.

    - call_api: the "slots" score (mean over personalization slots; invalid actions score 0).
    - generate: for each judge ("judge:<model>", optionally only those in `judges`), the mean
      over its repeats of its score (each the mean over the checkpoints it could score); then the
      mean over judges. Verifier verdicts are stored and reported beside it but do not enter it,
      as in the paper, whose scores come from the LLM judges alone.
    Unscored pieces (None) are left out of every mean; nothing scored at all gives None.
    """
    records = list(records)
    if kind == "call_api":
        slot = [r.score for r in records if r.scorer == "slots" and r.score is not None]
        return slot[0] if slot else None
    return panel_score(records, judges)


def replicate_score(kind: str, records: Iterable[ScoreRecord], repeat: int, judge: str) -> float | None:
    """One judge's repeat `repeat` for a generate run (Table 9 replicates); the slot score for
    call_api runs, which do not depend on the judge or its repeats."""
    records = list(records)
    if kind == "call_api":
        return instance_score(kind, records)
    scorer = judge if judge.startswith(JUDGE_PREFIX) else judge_scorer(judge)
    for r in records:
        if r.scorer == scorer and r.repeat == repeat:
            return r.score
    return None


def mean(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


def pass_hat_k(trial_scores: Iterable[Sequence[float]], k: int) -> float | None:
    """tau-bench's pass^k, unbiased: the mean over instances of C(c, k) / C(n, k), n an instance's scored
    trials (at least k) and c those scoring 1.0; None without such an instance. The report's ci table
    and a submission's recomputation both use it."""
    vals = [math.comb(sum(abs(s - 1.0) <= 1e-6 for s in v), k) / math.comb(len(v), k) for v in trial_scores if len(v) >= k]
    return sum(vals) / len(vals) if vals else None
