"""One selection for both front ends: `iba run` and the inspect task take the same instances."""

from __future__ import annotations

import argparse

import pytest

from iba.dataset import Dataset
from iba.run.runner import RunConfig
from iba.run.selection import Selection
from tests.run.helpers import users_dataset


def test_the_inspect_task_selects_what_iba_run_selects(tmp_path):
    pytest.importorskip("inspect_ai")
    from iba.inspect.task import bench_task, samples

    ds = Dataset(users_dataset(tmp_path / "ds", users=3))
    for domains, limit in ((None, None), (["daily"], None), (None, 3), (["daily"], 2)):
        run = RunConfig(agents=["rag"], domains=domains, limit=limit).task(ds).instances()
        inspect = samples(bench_task(str(ds.root), "rag", limit=limit, domains=domains, cache_dir=str(tmp_path / "c")))
        assert [s.id for s in inspect] == [t.instance_id for t in run] and run


def test_iba_run_and_the_inspect_task_build_the_same_task(tmp_path):
    """The one Task (run/task.py): `iba run`'s arguments and the inspect task's give the same
    dataset, instances, agents and scorers, with judges and without."""
    pytest.importorskip("inspect_ai")
    from iba.commands.run import add_arguments, run_config
    from iba.inspect.task import bench_task

    root = users_dataset(tmp_path / "ds", users=3)
    ds = Dataset(root)
    for judged, run_args, task_args in (
            (True, ["--agent", "iba", "--domain", "daily", "--limit", "2"], dict(agent="iba", domains="daily", limit=2)),
            (False, ["--judges", "none", "--scenario", "food_ordering"], dict(scenarios=["food_ordering"]))):
        parser = argparse.ArgumentParser()
        add_arguments(parser)
        args = parser.parse_args([str(root), *run_args])
        ours = run_config(args, judged=judged).task(ds)
        theirs = bench_task(str(root), judges=judged, cache_dir=str(tmp_path / "c"), **task_args)
        assert theirs.dataset.root == ours.dataset.root
        assert (theirs.selection, theirs.agents, theirs.scorers) == (ours.selection, ours.agents, ours.scorers)
        assert [t.instance_id for t in theirs.instances()] == [t.instance_id for t in ours.instances()]
        assert ours.instances() and ("judge" in ours.scorers) == judged
    with pytest.raises(KeyError, match="unknown scorer 'nope'; choose from: judge, qa, slots, verifiers"):
        RunConfig(agents=["rag"], scorers=("nope",)).task(ds)


def test_an_unknown_name_is_said_in_each_front_ends_words(tmp_path):
    ds = Dataset(users_dataset(tmp_path / "ds", users=2))
    sel = Selection(domains=["nope"])
    assert sel.problem(ds, ("--domain", "--scenario", "--user")).startswith("--domain: 'nope' is not in this dataset")
    assert Selection(users=["u9"]).problem(ds, ("-T domains", "-T scenarios", "-T users")).startswith(
        "-T users: 'u9' is not in this dataset (allowed: u0, u1)")
    with pytest.raises(ValueError, match="instances not in"):
        Selection(instance_ids=["missing"]).pool(ds)
