"""A panel of LLM judges with repeats, and the aggregation rules (paper C.2, C.3, Table 9).

Each (judge, repeat) pass over a response is one ScoreRecord under scorer "judge:<model_id>"
with one verdict per checkpoint; its score is the mean over the checkpoints it could score.
Repeat r uses seed `seed + r`, so repeats differ where the judge samples (temperature > 0).

Aggregation (used by scoring and reports alike):
- per judge: mean over its repeats of the repeat scores (unscored repeats left out);
- panel: mean over judges of the per-judge scores (judges with no score left out);
- spread: mean and sample standard deviation (n - 1) of replicate scores, as in Table 9.
"""

from __future__ import annotations

import asyncio
import math
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from iba.eval.judge import JudgeSettings, judge_checkpoint, judge_checkpoints_batch
from iba.eval.slots import mean_passed
from iba.llm.base import Backend
from iba.types import Checkpoint, ScoreRecord, Usage, Verdict

JUDGE_PREFIX = "judge:"
SAMPLING_TEMPERATURE = 0.7  # default for repeated judging, so that repeats can differ


def judge_scorer(model_id: str) -> str:
    return f"{JUDGE_PREFIX}{model_id}"


def default_temperature(repeats: int) -> float:
    """Greedy for a single pass; sampling when repeats are asked for (else they cannot differ).

    The temperature is not part of the stored key, so keep it fixed across resumed scoring."""
    return 0.0 if repeats <= 1 else SAMPLING_TEMPERATURE


@dataclass
class PanelConfig:
    repeats: int = 1
    seed: int = 42
    temperature: float | None = None  # None: default_temperature(repeats)
    max_tokens: int = 256
    batch: bool = False  # all checkpoints in one call (cheap); default one call each (the paper)

    def settings(self, repeat: int) -> JudgeSettings:
        t = default_temperature(self.repeats) if self.temperature is None else self.temperature
        return JudgeSettings(max_tokens=self.max_tokens, temperature=t, seed=self.seed + repeat)


async def judge_pass(
    backend: Backend, response: str, checkpoints: list[Checkpoint], *, repeat: int, cfg: PanelConfig,
    run_key: str = "", semaphore: asyncio.Semaphore | None = None, previous: ScoreRecord | None = None,
) -> ScoreRecord:
    """One judge's pass (one repeat) over every checkpoint of a response. With `previous` (a stored
    pass some of whose judge calls failed), only the checkpoints without a verdict are judged again;
    the rest are kept as they are. A pass with an errored verdict left has no score (errored)."""
    sem = semaphore or asyncio.Semaphore(4)
    settings = cfg.settings(repeat)
    kept = {v.target: v for v in (previous.verdicts if previous else []) if not v.errored}
    todo = [c for c in checkpoints if c.id not in kept]
    usage = previous.usage if previous else Usage()
    fresh: list[Verdict] = []
    if cfg.batch and len(todo) > 1:
        async with sem:
            fresh, u = await judge_checkpoints_batch(backend, response, todo, repeat=repeat, settings=settings)
        usage = usage.add(u)
    elif todo:
        async def one(c: Checkpoint) -> tuple[Verdict, Usage]:
            async with sem:
                return await judge_checkpoint(backend, response, c, repeat=repeat, settings=settings)

        results = await asyncio.gather(*(one(c) for c in todo))
        fresh = [v for v, _ in results]
        for _, u in results:
            usage = usage.add(u)
    by_id = kept | {v.target: v for v in fresh}
    verdicts = [by_id[c.id] for c in checkpoints]
    errored = any(v.errored for v in verdicts)
    return ScoreRecord(run_key=run_key, scorer=judge_scorer(backend.model_id), repeat=repeat, verdicts=verdicts,
                       score=None if errored else mean_passed(verdicts), usage=usage, errored=errored)


async def judge_panel(
    response: str, checkpoints: list[Checkpoint], judges: Sequence[Backend], cfg: PanelConfig, *,
    run_key: str = "", skip: Callable[[str, int], bool] | None = None,
    semaphore: asyncio.Semaphore | None = None,
    on_record: Callable[[ScoreRecord], None] | None = None,
    previous: Callable[[str, int], ScoreRecord | None] | None = None,
) -> list[ScoreRecord]:
    """Every (judge, repeat) pass not skipped; `on_record` sees each record as soon as it exists
    (the scorer stores it there, so an interrupted panel resumes where it stopped). `previous`
    gives a stored errored pass to complete (judge_pass)."""
    sem = semaphore or asyncio.Semaphore(4)
    out: list[ScoreRecord] = []

    async def run(backend: Backend, r: int) -> None:
        before = previous(judge_scorer(backend.model_id), r) if previous else None
        rec = await judge_pass(backend, response, checkpoints, repeat=r, cfg=cfg, run_key=run_key, semaphore=sem,
                               previous=before)
        out.append(rec)
        if on_record:
            on_record(rec)

    unique = list({b.model_id: b for b in judges}.values())  # one judge named twice is judged once
    jobs = [(b, r) for b in unique for r in range(cfg.repeats)
            if not (skip and skip(judge_scorer(b.model_id), r))]
    await asyncio.gather(*(run(b, r) for b, r in jobs))
    order = {(judge_scorer(b.model_id), r): i for i, (b, r) in enumerate(jobs)}
    return sorted(out, key=lambda s: order[(s.scorer, s.repeat)])


# --------------------------------------------------------------------------- aggregation


def per_judge_scores(records: Iterable[ScoreRecord]) -> dict[str, float]:
    """judge scorer -> mean over its scored repeats (judges with nothing scored are absent)."""
    by_judge: dict[str, list[float]] = defaultdict(list)
    for r in records:
        if r.scorer.startswith(JUDGE_PREFIX) and r.score is not None:
            by_judge[r.scorer].append(r.score)
    return {j: sum(v) / len(v) for j, v in by_judge.items()}


def panel_score(records: Iterable[ScoreRecord], judges: Iterable[str] | None = None) -> float | None:
    """Mean over judges of each judge's mean over repeats; `judges` limits which judge scorers count."""
    scores = per_judge_scores(records)
    if judges is not None:
        wanted = {j if j.startswith(JUDGE_PREFIX) else judge_scorer(j) for j in judges}
        scores = {j: s for j, s in scores.items() if j in wanted}
    return sum(scores.values()) / len(scores) if scores else None


def mean_sd(values: Iterable[float | None]) -> tuple[float | None, float | None]:
    """Mean and sample standard deviation of the non-None values; sd is None below two values."""
    vals = [v for v in values if v is not None and not math.isnan(v)]
    if not vals:
        return None, None
    return sum(vals) / len(vals), (statistics.stdev(vals) if len(vals) >= 2 else None)
