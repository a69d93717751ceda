"""One selection for both front ends: `iba run` and the inspect task take the same instances."""

from __future__ import annotations

import pytest

from iba.dataset import Dataset
from iba.run.runner import RunConfig, select_instances
from iba.run.selection import Selection
from tests.run.helpers import users_dataset


def test_the_inspect_task_selects_what_iba_run_selects(tmp_path):
    pytest.importorskip("inspect_ai")
    from iba.inspect.task import samples

    ds = Dataset(users_dataset(tmp_path / "ds", users=3))
    for domains, limit in ((None, None), (["daily"], None), (None, 3), (["daily"], 2)):
        run = select_instances(ds, RunConfig(agents=["rag"], domains=domains, limit=limit))
        inspect = samples(ds, limit=limit, domains=domains, scenarios=None)
        assert [s.id for s in inspect] == [t.instance_id for t in run] and run


def test_an_unknown_name_is_said_in_each_front_ends_words(tmp_path):
    ds = Dataset(users_dataset(tmp_path / "ds", users=2))
    sel = Selection(domains=["nope"])
    assert sel.problem(ds, ("--domain", "--scenario", "--user")).startswith("--domain: 'nope' is not in this dataset")
    assert Selection(users=["u9"]).problem(ds, ("-T domains", "-T scenarios", "-T users")).startswith(
        "-T users: 'u9' is not in this dataset (allowed: u0, u1)")
    with pytest.raises(ValueError, match="instances not in"):
        Selection(instance_ids=["missing"]).pool(ds)
