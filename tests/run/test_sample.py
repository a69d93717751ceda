"""`iba run --sample`: the stratified draw (property tests over random pools and seeds), the
store's one-sample-per-dataset rule, and the command line."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iba.cli import main
from iba.dataset import Dataset
from iba.run.runner import RunConfig, run_dataset
from iba.run.sample import STRATA, SampleError, bind_sample, draw_sample, ids_sha, make_sample
from iba.run.store import Store
from iba.types import TaskView
from tests.construct.conftest import demo_dir  # noqa: F401  (a demo build)
from tests.fakes import ScriptedBackend
from tests.run.helpers import tiny_dataset


def _task(i: int, user: str, domain: str, scenario: str, action: str) -> TaskView:
    return TaskView(instance_id=f"i{i:03d}", user_id=user, domain=domain, scenario=scenario, scenario_name=scenario,
                    query="q", action=action, now="2025-01-01T00:00:00")


@st.composite
def pools(draw) -> list[TaskView]:
    """Domains of 1-3 scenarios, each scenario of one action kind (as in IBA-Bench), users with 0-2
    instances per scenario."""
    scenarios = []
    for d in range(draw(st.integers(1, 4))):
        for s in range(draw(st.integers(1, 3))):
            scenarios.append((f"d{d}", f"d{d}s{s}", draw(st.sampled_from(["generate", "call_api"]))))
    users = [f"u{u}" for u in range(draw(st.integers(1, 6)))]
    tasks = []
    for u in users:
        for domain, scen, action in scenarios:
            for _ in range(draw(st.integers(0, 2))):
                tasks.append(_task(len(tasks), u, domain, scen, action))
    return tasks


def _value(t: TaskView, stratum: str) -> str:
    return {"action": t.action, "domain": t.domain, "user": t.user_id, "scenario": t.scenario}[stratum]


@settings(max_examples=200, deadline=None)
@given(pool=pools(), n=st.integers(0, 40), seed=st.integers(0, 2**32 - 1))
def test_draw_is_stratified_over_any_pool_and_seed(pool, n, seed):
    got = draw_sample(pool, n, seed)
    ids = [t.instance_id for t in got]
    assert len(ids) == len(set(ids)) == min(n, len(pool))
    assert set(ids) <= {t.instance_id for t in pool}  # every drawn id exists
    assert got == draw_sample(pool, n, seed)  # same seed, same sample
    everything = draw_sample(pool, len(pool) + 5, seed)
    assert {t.instance_id for t in everything} == {t.instance_id for t in pool}  # N >= pool: all of it
    assert everything[:len(got)] == got  # the sample of N is the first N of any larger one
    left = [t for t in pool if t.instance_id not in set(ids)]
    # the first stratum (domains): counts differ by 2 or more only when the smaller one ran out
    first = Counter(_value(t, STRATA[0]) for t in got)
    for x in first:
        for y in {_value(t, STRATA[0]) for t in pool}:
            if first[x] >= first[y] + 2:
                assert not any(_value(t, STRATA[0]) == y for t in left), (x, y, first)
    # every later stratum: x drawn 2+ more than y only where, at x's last draw, y had nothing left
    # under the values of the earlier strata chosen then (left only shrinks: still nothing at the end)
    for level in range(1, len(STRATA)):
        s = STRATA[level]
        counts = Counter(_value(t, s) for t in got)
        for x in counts:
            last = next(t for t in reversed(got) if _value(t, s) == x)
            prefix = [(p, _value(last, p)) for p in STRATA[:level]]
            for y in {_value(t, s) for t in pool}:
                if counts[x] >= counts[y] + 2:
                    assert not any(_value(t, s) == y and all(_value(t, p) == v for p, v in prefix) for t in left), \
                        (s, x, y, counts)


@settings(max_examples=100, deadline=None)
@given(users=st.integers(1, 8), domains=st.integers(1, 4), seed=st.integers(0, 2**32 - 1), data=st.data())
def test_a_full_design_balances_users_domains_and_actions(users, domains, seed, data):
    """Every user has one task in every scenario, every domain one scenario of each kind: then
    every domain and action kind count stays within 1 of the others, at every N, and users within 2
    (the draw is greedy level by level: a user's cells under the chosen domain and action can run
    out first; docs/references_and_samples.md)."""
    pool = []
    for u in range(users):
        for d in range(domains):
            for action in ("generate", "call_api"):
                pool.append(_task(len(pool), f"u{u}", f"d{d}", f"d{d}-{action}", action))
    n = data.draw(st.integers(1, len(pool)))
    got = draw_sample(pool, n, seed)
    for s, gap in (("domain", 1), ("action", 1), ("user", 2)):
        c = Counter(_value(t, s) for t in got)
        values = {_value(t, s) for t in pool}
        assert max(c.values()) - min(c.get(v, 0) for v in values) <= gap, (s, c)


def test_seeds_differ_and_ids_sha_is_the_set():
    pool = [_task(i, f"u{i % 5}", f"d{i % 3}", f"d{i % 3}s", "generate") for i in range(30)]
    a, b = draw_sample(pool, 6, 1), draw_sample(pool, 6, 2)
    assert a != b
    ids = [t.instance_id for t in a]
    assert ids_sha(ids) == ids_sha(list(reversed(ids))) != ids_sha([t.instance_id for t in b])
    with pytest.raises(ValueError, match="twice"):
        draw_sample(pool + pool[:1], 3, 0)


# ---------------------------------------------------------------- the store: one sample per dataset


def _ids(n, seed, ds):
    return [t.instance_id for t in draw_sample(ds.instances, n, seed)]


def _run(ds, store, **kw):
    cfg = RunConfig(agents=["null"], score=False, progress=False, **kw)
    backend = ScriptedBackend(lambda m, k: {"texture": "soft"} if "order_food" in str(m) else "text")
    return asyncio.run(run_dataset(ds, backend, store, cfg))


def test_a_store_keeps_one_sample_and_refuses_to_mix(demo_dir, tmp_path):
    ds = Dataset(demo_dir)
    with Store(tmp_path / "s.sqlite") as store:
        s1 = _run(ds, store, sample=2, sample_seed=3)
        assert s1.planned == 2 and "a stratified sample of 2 of 6 instances, seed 3" in s1.notes[0]
        stored = store.get_sample(_did(ds))
        assert stored.instance_ids == _ids(2, 3, ds)
        assert {r.instance_id for r in store.runs()} == set(stored.instance_ids)
        assert _run(ds, store, sample=2, sample_seed=3).skipped == 2  # the same sample resumes
        with pytest.raises(SampleError, match="rerun with --sample 2 --sample-seed 3"):
            _run(ds, store)  # the whole dataset would mix into the sample's tables
        other = _ids(2, 4, ds)
        if set(other) != set(stored.instance_ids):
            with pytest.raises(SampleError, match="outside a stratified sample of 2 of 6 instances, seed 4"):
                _run(ds, store, sample=2, sample_seed=4)
        grown = _run(ds, store, sample=4, sample_seed=3)  # holds the stored records: replaces, says so
        assert grown.planned == 4 and grown.skipped == 2 and "in place of a stratified sample of 2" in grown.notes[0]
        assert store.get_sample(stored.dataset).replaces == [stored.describe()]
        # a run inside the sample needs no --sample (e.g. one of its instances with another agent)
        inside = _run(ds, store, instance_ids=[stored.instance_ids[0]])
        assert inside.skipped == 1


def test_a_store_with_other_results_takes_a_sample_only_if_it_holds_them(tmp_path):
    ds = Dataset(tiny_dataset(tmp_path / "ds"))
    did = _did(ds)
    i0, i1 = ds.instances
    with Store(tmp_path / "s.sqlite") as store:
        _run(ds, store, instance_ids=["i0"])  # no sample
        only_i1 = make_sample([i1], 1, 0, dataset=did, dataset_instances=2)
        with pytest.raises(SampleError, match=r"holds results that are not of a sample .* \(e\.g\. i0\)"):
            bind_sample(store, did, only_i1, only_i1.instance_ids)
        assert store.get_sample(did) is None
        both = make_sample([i0, i1], 2, 0, dataset=did, dataset_instances=2)
        assert "recorded in" in bind_sample(store, did, both, both.instance_ids)
        assert store.get_sample(did) == both
        with pytest.raises(SampleError, match="not within its sample"):  # a caller's bug, said as such
            bind_sample(store, did, only_i1, ["i0"])


def _did(ds):
    from iba.dataset import dataset_id

    return dataset_id(ds)


def test_the_task_samples_within_the_filters(demo_dir):
    ds = Dataset(demo_dir)
    got = RunConfig(agents=["null"], domains=["daily"], sample=2, sample_seed=1).task(ds).instances()
    assert len(got) == 2 and {t.domain for t in got} == {"daily"}
    assert got == draw_sample([t for t in ds.instances if t.domain == "daily"], 2, 1)


# ---------------------------------------------------------------- iba run --sample


def test_cli_sample_options_and_refusals(demo_dir, tmp_path, capsys):
    store = tmp_path / "cli.sqlite"
    base = ["run", str(demo_dir), "--store", str(store), "--no-score", "--quiet"]
    assert main(base + ["--sample", "2", "--limit", "1"]) == 2
    assert "argument --limit: not with --sample" in capsys.readouterr().err
    assert main(base + ["--sample-seed", "3"]) == 2
    assert "argument --sample-seed: only with --sample N" in capsys.readouterr().err
    with Store(store) as s:  # a sample recorded before: a plain run is refused before any model loads
        s.put_sample(make_sample(Dataset(demo_dir).instances, 2, 0, dataset=_did(Dataset(demo_dir)),
                                 dataset_instances=6))
    assert main(base + ["--agent", "null"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "rerun with --sample 2 --sample-seed 0" in err and "Traceback" not in err
