"""Stratified samples of a benchmark (`iba run --sample N --sample-seed S`) and the rule that keeps
a sample's results apart from any other selection in a store.

The draw (`draw_sample`), one instance at a time until N are drawn or the pool is empty:

  1. Ties are broken by seeded orders, drawn once from `random.Random(seed)`: for each stratum in
     STRATA order (domain, action kind, user, scenario), a shuffle of its sorted values; then, per
     cell (domain, action, user, scenario), a shuffle of its instance ids (sorted first).
  2. Level by level, in STRATA order, the value chosen is the one with instances left under the
     values chosen so far that the sample holds fewest of (counted over the whole sample so
     far), ties to the earliest in that stratum's seeded order. The draw is the next instance of
     the chosen cell.

What follows from that (tests/run/test_sample.py checks each over random pools and seeds):
  * the same pool and seed give the same sample; the sample of N is the first N of the sample of
    any larger N (so a sample can grow without changing what was drawn);
  * N >= the pool: every instance;
  * domains (Table 4's columns): counts differ by at most 1 unless a domain has no instance left;
  * every later stratum: a value x is drawn 2 or more times more often than a value y only where,
    at x's last draw, y had no instance left under the earlier strata's values chosen for it
    (e.g. call_api in a domain whose tasks are all generate).

Domains come first because on IBA-Bench they nearly fix the action kind (7 of 9 domains hold one
kind only), so both cannot be balanced: a sample then splits generate / call_api as its domains
do (about 56 / 44 at N = 100 on a full build; the benchmark itself is 67 / 33). Users come out
within 1 of each other while N is below the number of users (all distinct up to N = 399 of a
full build's 400, seed 0).

A store holds at most one sample per dataset (`samples` table), and its records on that dataset
never leave the sample: `bind_sample` refuses a run whose selection has an instance outside the
stored sample, and a new sample while the store holds a record outside it; a new sample that holds
every stored record replaces the record, saying so (e.g. a sample grown from 24 to 48).
"""

from __future__ import annotations

import hashlib
import random
from collections import Counter, defaultdict
from collections.abc import Sequence

from pydantic import Field

from iba.types import Strict, TaskView

STRATA = ("domain", "action", "user", "scenario")


def _value(task: TaskView, stratum: str) -> str:
    return {"action": task.action, "domain": task.domain, "user": task.user_id, "scenario": task.scenario}[stratum]


def ids_sha(instance_ids: Sequence[str]) -> str:
    """sha256 of the sorted ids, one per line: a sample's identity, whatever order it was drawn in."""
    return hashlib.sha256("\n".join(sorted(instance_ids)).encode()).hexdigest()


def draw_sample(tasks: Sequence[TaskView], n: int, seed: int = 0) -> list[TaskView]:
    """The stratified sample of `n` of `tasks`, in draw order (module docstring: the algorithm)."""
    if n < 0:
        raise ValueError(f"a sample size must be >= 0, got {n}")
    rng = random.Random(seed)
    tie_order: dict[str, dict[str, int]] = {}
    for s in STRATA:
        values = sorted({_value(t, s) for t in tasks})
        rng.shuffle(values)
        tie_order[s] = {v: i for i, v in enumerate(values)}
    by_id = {t.instance_id: t for t in tasks}
    if len(by_id) != len(tasks):
        raise ValueError("the pool names an instance id twice")
    cells: dict[tuple[str, ...], list[str]] = defaultdict(list)
    for t in sorted(tasks, key=lambda t: t.instance_id):
        cells[tuple(_value(t, s) for s in STRATA)].append(t.instance_id)
    for key in sorted(cells):
        rng.shuffle(cells[key])
        cells[key].reverse()  # pop() from the end takes them in the shuffled order
    # instances left under each prefix of the strata: () -> all, (a,) -> of action a, (a, d) -> ...
    left: Counter[tuple[str, ...]] = Counter()
    children: dict[tuple[str, ...], set[str]] = defaultdict(set)
    for key, ids in cells.items():
        for depth in range(len(STRATA) + 1):
            left[key[:depth]] += len(ids)
            if depth < len(STRATA):
                children[key[:depth]].add(key[depth])
    drawn: dict[str, Counter[str]] = {s: Counter() for s in STRATA}
    out: list[TaskView] = []
    while len(out) < n and left[()] > 0:
        prefix: tuple[str, ...] = ()
        for s in STRATA:
            options = [v for v in children[prefix] if left[prefix + (v,)] > 0]
            prefix += (min(options, key=lambda v: (drawn[s][v], tie_order[s][v])),)
        task = by_id[cells[prefix].pop()]
        for depth in range(len(STRATA) + 1):
            left[prefix[:depth]] -= 1
        for s, v in zip(STRATA, prefix):
            drawn[s][v] += 1
        out.append(task)
    return out


class Sample(Strict):
    """A drawn sample as the store, the report and a submission record it."""

    dataset: str  # the runner's dataset id (name@manifest-hash)
    n: int = Field(ge=0)  # instances drawn: min(asked, pool)
    asked: int = Field(ge=1)  # --sample N
    seed: int
    strata: list[str] = Field(default_factory=lambda: list(STRATA))
    pool: int = Field(ge=0)  # instances it was drawn from
    dataset_instances: int = Field(ge=0)  # instances of the whole dataset
    filters: dict[str, list[str]] = Field(default_factory=dict)  # --domain / --scenario / --user that made the pool
    instance_ids: list[str]  # in draw order
    instance_ids_sha: str  # ids_sha(instance_ids)
    replaces: list[str] = Field(default_factory=list)  # earlier samples of this store it replaced (describe())
    command: str = ""  # what draws it again, when not `iba run` (a bench script)

    def describe(self) -> str:
        where = "; ".join(f"{k} {', '.join(v)}" for k, v in sorted(self.filters.items()))
        return (f"a stratified sample of {self.n} of {self.pool} instances" + (f" ({where})" if where else "")
                + f", seed {self.seed}, ids sha256 {self.instance_ids_sha[:12]}")

    def command_options(self) -> str:
        """The `iba run` options that draw this sample again (or the command that drew it)."""
        if self.command:
            return self.command
        opts = [f"--sample {self.asked}", f"--sample-seed {self.seed}"]
        opts += [f"--domain {d}" for d in self.filters.get("domain", [])]
        opts += [f"--scenario {s}" for s in self.filters.get("scenario", [])]
        opts += [f"--user {u}" for u in self.filters.get("user", [])]
        return " ".join(opts)


def make_sample(pool: Sequence[TaskView], asked: int, seed: int, *, dataset: str, dataset_instances: int,
                filters: dict[str, list[str]] | None = None) -> Sample:
    """Draw `asked` of `pool` and describe the result."""
    ids = [t.instance_id for t in draw_sample(pool, asked, seed)]
    return Sample(dataset=dataset, n=len(ids), asked=asked, seed=seed, pool=len(pool),
                  dataset_instances=dataset_instances, filters={k: list(v) for k, v in (filters or {}).items() if v},
                  instance_ids=ids, instance_ids_sha=ids_sha(ids))


class SampleError(ValueError):
    """A run would mix a sample's results with another selection in one store."""


def bind_sample(store, dataset: str, sample: Sample | None, selection: Sequence[str]) -> str | None:
    """Check a run's selection against the store's sample of `dataset` and record a new sample.
    Returns a line to show the user (a sample recorded or replaced), or None; SampleError when the
    run would mix selections. `store` is a run.store.Store (its sample methods)."""
    stored = store.get_sample(dataset)
    if sample is None:
        if stored is None:
            return None
        outside = sorted(set(selection) - set(stored.instance_ids))
        if outside:
            raise SampleError(
                f"{store.path} holds {stored.describe()} on {dataset}; this run selects {len(outside)} instance(s) "
                f"outside it (e.g. {outside[0]}), which would mix into the sample's tables: rerun with "
                f"{stored.command_options()}, or give another --store")
        return None
    wanted = set(sample.instance_ids)
    if not set(selection) <= wanted:
        raise SampleError("the run's selection is not within its sample")  # a caller's bug, not the user's
    if stored is not None and stored.instance_ids_sha == sample.instance_ids_sha:
        return None
    outside = sorted(store.instance_ids(dataset) - wanted)
    if outside:
        held = stored.describe() if stored is not None else "results that are not of a sample"
        raise SampleError(
            f"{store.path} holds {held} on {dataset}, with {len(outside)} instance(s) outside {sample.describe()} "
            f"(e.g. {outside[0]}); one store holds one selection per dataset, so its tables never mix two: give "
            "another --store" + (f", or rerun with {stored.command_options()}" if stored is not None else ""))
    if stored is not None:
        sample = sample.model_copy(update={"replaces": [*stored.replaces, stored.describe()]})
    store.put_sample(sample)
    if stored is None:
        return f"sample: {sample.describe()}, recorded in {store.path}"
    return f"sample: {sample.describe()}, recorded in {store.path} in place of {stored.describe()} (every stored record is in both)"
