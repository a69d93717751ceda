"""Which instances a run takes: one Selection (ids, domains, scenarios, users, a stratified sample,
a limit) that `iba run` (its batch path included) and the inspect task `iba/iba_bench` both apply,
so the same arguments select the same instances in both front ends."""

from __future__ import annotations

from iba.dataset import Dataset, dataset_id
from iba.run.sample import Sample, draw_sample, make_sample
from iba.types.common import Strict
from iba.types.dataset import TaskView


class Selection(Strict):
    instance_ids: list[str] | None = None  # only these instances, in this order (a fixed sample)
    domains: list[str] | None = None
    scenarios: list[str] | None = None
    users: list[str] | None = None  # only these users' instances
    sample: int | None = None  # a stratified sample of this many of the pool (run/sample.py)
    sample_seed: int = 0
    limit: int | None = None  # the first N after the sample

    def problem(self, ds: Dataset, flags: tuple[str, str, str]) -> str | None:
        """Why a domain, scenario or user asked for is not in `ds` (a typo would otherwise select
        nothing), worded with the front end's `flags` for them; None when all exist."""
        for flag, wanted, have in ((flags[0], self.domains, {t.domain for t in ds.instances}),
                                   (flags[1], self.scenarios, {t.scenario for t in ds.instances}),
                                   (flags[2], self.users, {t.user_id for t in ds.instances})):
            unknown = [v for v in wanted or [] if v not in have]
            if unknown:
                return f"{flag}: {unknown[0]!r} is not in this dataset (allowed: {', '.join(sorted(have))})"
        return None

    def pool(self, ds: Dataset) -> list[TaskView]:
        """The instances the ids, domains, scenarios and users allow, before the sample and the limit."""
        items = ds.instances
        if self.instance_ids is not None:
            by_id = {t.instance_id: t for t in items}
            missing = [i for i in self.instance_ids if i not in by_id]
            if missing:
                raise ValueError(f"instances not in {ds.root}: {', '.join(missing[:5])}")
            items = [by_id[i] for i in self.instance_ids]
        if self.domains:
            items = [t for t in items if t.domain in self.domains]
        if self.scenarios:
            items = [t for t in items if t.scenario in self.scenarios]
        if self.users:
            items = [t for t in items if t.user_id in self.users]
        return items

    def select(self, ds: Dataset) -> list[TaskView]:
        items = self.pool(ds)
        if self.sample is not None:
            items = draw_sample(items, self.sample, self.sample_seed)
        return items[: self.limit] if self.limit else items

    def sample_record(self, ds: Dataset) -> Sample | None:
        """The record of the sample (None without one), as the store and reports keep it."""
        if self.sample is None:
            return None
        return make_sample(self.pool(ds), self.sample, self.sample_seed, dataset=dataset_id(ds),
                           dataset_instances=len(ds.instances),
                           filters={"domain": self.domains or [], "scenario": self.scenarios or [], "user": self.users or []})
