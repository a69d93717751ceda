"""Every aggregate of a submission entry, computed from its per-instance results: the one rule that
`iba submit prepare` writes them by and `iba submit validate` checks them by.

From the bottom up: a scorer's score is the mean of its scored verdicts (0 for an agent's failure
with no target to score); a trial's score is iba.eval.aggregate.instance_score over its scorers
(the rule every report uses); an instance's score is the mean over its scored trials; a result
(per domain, overall) is the mean over scored instances x100 with the seeded bootstrap interval
(instances in id order, so anyone gets the same interval); pass^k is tau-bench's unbiased
C(c, k) / C(n, k) over all n scored trials of an instance, averaged over instances.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from iba.eval.aggregate import instance_score, mean, pass_hat_k
from iba.report.intervals import bootstrap_ci
from iba.submit.schema import (OVERALL, SINGLE, Counts, Entry, InstanceResult, Result, Sample, ScorerResult,
                               Submission, Usage)
from iba.types import ScoreRecord, Verdict

SCORE_TOL = 1e-6  # scores in [0, 1]: recomputed from the same numbers, they agree exactly
PCT_TOL = 0.01  # x100 figures are rounded to 2 decimals


def scorer_problem(s: ScorerResult) -> str | None:
    """Why a scorer's stated score does not follow from its verdicts, or None."""
    scored = [p for p in s.verdicts.values() if p is not None]
    if s.errored or not scored:
        ok = s.score is None or (not s.errored and s.failure is not None and s.score == 0.0 and not s.verdicts)
        return None if ok else f"score {s.score} with no scored verdict"
    want = sum(scored) / len(scored)
    return None if s.score is not None and abs(s.score - want) <= SCORE_TOL else f"score {s.score}, verdicts give {want:.6g}"


def _records(r: InstanceResult) -> list[ScoreRecord]:
    kind = "slot" if r.action == "call_api" else "checkpoint"
    return [ScoreRecord(run_key="", scorer=s.scorer, repeat=s.repeat, score=s.score, failure=s.failure,
                        errored=s.errored,
                        verdicts=[Verdict(target=t, kind=kind, judge=s.scorer.removeprefix("judge:"), repeat=s.repeat,
                                          passed=p) for t, p in s.verdicts.items()])
            for s in r.scores]


def trial_score(r: InstanceResult) -> float | None:
    return instance_score(r.action, _records(r))


def instance_scores(instances: Iterable[InstanceResult]) -> dict[str, float | None]:
    """Instance id -> mean over its trials of the trial scores (None: no trial scored), in id order."""
    trials: dict[str, list[float | None]] = defaultdict(list)
    for r in instances:
        trials[r.instance_id].append(trial_score(r))
    return {iid: mean(trials[iid]) for iid in sorted(trials)}


def result(values: Sequence[float]) -> Result:
    """The mean x100 of instance scores (in id order) with its 95% interval; none for n < 2."""
    ci = bootstrap_ci(values)
    if ci is None:
        return Result(score=None, n=0)
    score = round(100 * ci.mean, 2)
    if ci.n < 2:
        return Result(score=score, n=ci.n, note=SINGLE)
    return Result(score=score, ci=(round(100 * ci.lo, 2), round(100 * ci.hi, 2)), n=ci.n)


def results(instances: Sequence[InstanceResult], domains: Iterable[str]) -> dict[str, Result]:
    scores = instance_scores(instances)
    domain = {r.instance_id: r.domain for r in instances}
    out = {OVERALL: result([v for v in scores.values() if v is not None])}
    for d in sorted(domains):
        out[d] = result([v for iid, v in scores.items() if v is not None and domain[iid] == d])
    return out


def pass_k(instances: Sequence[InstanceResult], trials: int) -> dict[str, float] | None:
    """tau-bench's pass^k, unbiased: per instance, C(c, k) / C(n, k) with n its scored trials and c
    those scoring 1.0; averaged over instances with a scored trial, for k = 1 .. the fewest n."""
    if trials < 2:
        return None
    per: dict[str, list[float]] = defaultdict(list)
    for r in instances:
        s = trial_score(r)
        if s is not None:
            per[r.instance_id].append(s)
    if not per:
        return None
    top = min(len(v) for v in per.values())
    return {str(k): round(100 * pass_hat_k(per.values(), k), 2) for k in range(1, top + 1)}  # type: ignore[operator]


def counts(instances: Sequence[InstanceResult], dataset_instances: int, sample: int) -> Counts:
    by: dict[str, list[InstanceResult]] = defaultdict(list)
    for r in instances:
        by[r.instance_id].append(r)
    scored = {iid for iid, v in instance_scores(instances).items() if v is not None}
    return Counts(instances=dataset_instances, sample=sample, run=len(by),
                  ok=sum(all(r.status == "ok" for r in v) for v in by.values()),
                  failed=sum(any(r.status == "failed" for r in v) for v in by.values()),
                  errored=sum(any(r.status == "errored" for r in v) for v in by.values()),
                  unscored=sum(iid not in scored and not any(r.status == "errored" for r in v) for iid, v in by.items()))


def usage(items: Iterable[Usage | None]) -> Usage:
    items = [u for u in items if u is not None]
    return Usage(llm_calls=sum(u.llm_calls for u in items), prompt_tokens=sum(u.prompt_tokens for u in items),
                 completion_tokens=sum(u.completion_tokens for u in items))


def judge_usage(instances: Iterable[InstanceResult]) -> Usage:
    return usage(s.usage for r in instances for s in r.scores if s.scorer.startswith("judge:"))


def omitted(instances: Sequence[InstanceResult], sample_ids: Iterable[str]) -> list[str]:
    """The sample's instances without a score (not run, errored, unscored), sorted."""
    scores = instance_scores(instances)
    return sorted(i for i in sample_ids if scores.get(i) is None)


def entry_problems(e: Entry, per_domain: dict[str, int], dataset_ids: Sequence[str] | None = None) -> list[str]:
    """Where entry `e`'s stated aggregates differ from what its per-instance results give (with
    `dataset_ids`, the dataset's instance ids: also the sample and the omissions against them)."""
    where = f"entries[{e.agent} ({e.model}, run {e.run})]"
    out: list[str] = []
    seen: set[tuple[str, int]] = set()
    for r in e.instances:
        if (r.instance_id, r.trial) in seen:
            out.append(f"{where}.instances: {r.instance_id} trial {r.trial} appears twice")
        seen.add((r.instance_id, r.trial))
        for s in r.scores:
            why = scorer_problem(s)
            if why:
                out.append(f"{where}.instances[{r.instance_id} trial {r.trial}].scores[{s.scorer} #{s.repeat}]: {why}")
        want = trial_score(r)
        if (want is None) != (r.score is None) or (want is not None and abs(want - r.score) > SCORE_TOL):  # type: ignore[operator]
            out.append(f"{where}.instances[{r.instance_id} trial {r.trial}].score: {r.score}, its scores give {want}")
    ids = dataset_ids if e.sample.kind == "full" and dataset_ids is not None else e.sample.ids
    if ids is not None:
        outside = sorted({r.instance_id for r in e.instances} - set(ids))
        if outside:
            out.append(f"{where}.instances: {len(outside)} instance(s) outside the sample (first: {outside[0]})")
        want_omitted = omitted(e.instances, ids)
        if sorted(e.verification.omitted) != want_omitted:
            out.append(f"{where}.verification.omitted: {len(e.verification.omitted)} listed, the results give "
                       f"{len(want_omitted)} of the sample without a score")
    if dataset_ids is not None and e.sample.ids is not None and set(e.sample.ids) - set(dataset_ids):
        out.append(f"{where}.sample.ids: names instances the dataset does not have")
    out += _compare(f"{where}.results", {k: v.model_dump() for k, v in e.results.items()},
                    {k: v.model_dump() for k, v in results(e.instances, per_domain).items()})
    out += _compare(f"{where}.pass_k", e.pass_k, pass_k(e.instances, e.trials))
    trials = max((sum(1 for r in e.instances if r.instance_id == i) for i in {r.instance_id for r in e.instances}),
                 default=0)
    if e.instances and e.trials != trials:
        out.append(f"{where}.trials: {e.trials}, the results hold at most {trials} per instance")
    out += _compare(f"{where}.counts", e.counts.model_dump(),
                    counts(e.instances, e.counts.instances, e.sample.instances).model_dump())
    out += _compare(f"{where}.cost.agent", e.cost.agent.model_dump(), usage(r.usage for r in e.instances).model_dump())
    out += _compare(f"{where}.cost.judges", e.cost.judges.model_dump(), judge_usage(e.instances).model_dump())
    out += _compare(f"{where}.cost.wall_s", e.cost.wall_s, round(sum(r.wall_s for r in e.instances), 3))
    return out


def _compare(where: str, stated: Any, want: Any) -> list[str]:
    """Differences between a stated value and the recomputed one, field by field."""
    if isinstance(stated, dict) and isinstance(want, dict):
        out = []
        for k in sorted(set(stated) | set(want)):
            if k not in want:
                out.append(f"{where}.{k}: stated, but the results give none")
            elif k not in stated:
                out.append(f"{where}.{k}: missing; the results give {want[k]}")
            else:
                out += _compare(f"{where}.{k}", stated[k], want[k])
        return out
    if isinstance(stated, (list, tuple)) and isinstance(want, (list, tuple)) and len(stated) == len(want):
        return [p for i, (a, b) in enumerate(zip(stated, want)) for p in _compare(f"{where}[{i}]", a, b)]
    if isinstance(stated, (int, float)) and isinstance(want, (int, float)) and not isinstance(stated, bool):
        return [] if abs(stated - want) <= PCT_TOL else [f"{where}: {stated}, the results give {want}"]
    return [] if stated == want else [f"{where}: {stated!r}, the results give {want!r}"]


def problems(sub: Submission, dataset_ids: Sequence[str] | None = None) -> list[str]:
    """Every aggregate of `sub` that its per-instance results do not give."""
    return [p for e in sub.entries for p in entry_problems(e, sub.dataset.per_domain, dataset_ids)]


def sample_of(run_ids: Iterable[str], dataset_ids: Sequence[str]) -> Sample:
    """The sample an entry's numbers come from, as seen from what was run: the full dataset when
    every instance was run, else the subset of instances run (sorted ids)."""
    run = set(run_ids)
    if run >= set(dataset_ids):
        return Sample(kind="full", instances=len(dataset_ids))
    ids = sorted(run & set(dataset_ids))
    return Sample(kind="subset", instances=len(ids), ids=ids)
