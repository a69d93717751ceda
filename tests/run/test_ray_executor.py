"""`iba run --executor ray` on a local Ray cluster of 2 workers.

What is checked is the store: the Ray executor gives exactly the local executor's records (keys,
actions) and scores; a run interrupted under one executor finishes under the other with one record
per key; a worker that dies leaves an errored record, not a lost or duplicated one. The agents run
in Ray worker processes, so the test agent and backend are registered by "module:attr" name, which
the executor hands to its workers.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import sqlite3
import sys
from pathlib import Path

import pytest

from iba import registry
from iba.agents.base import Agent
from iba.cli import main
from iba.dataset import Dataset
from iba.run.runner import RunConfig, run_dataset
from iba.run.store import Store
from iba.types import Action
from tests.fakes import ScriptedBackend
from tests.run.helpers import tiny_dataset

REPO = Path(__file__).resolve().parents[2]


class EchoAgent(Agent):
    """Deterministic, no model: the answer depends on the task and the seed only.
    `die=<instance id>&deaths=<n>&marker=<path>` kills its process (as an OOM kill or a crash in
    native code would) on the first n attempts at that instance's task; the marker file counts them."""

    name = "ray-echo"

    async def act(self, task, history):
        if self.options.get("die") == task.instance_id and task.probe is None:
            marker = Path(self.options["marker"])
            died = marker.read_text().split() if marker.exists() else []
            if len(died) < int(self.options["deaths"]):
                marker.write_text(" ".join([*died, str(os.getpid())]))
                os._exit(1)
        if task.action == "call_api":
            return Action(kind="call_api", api_name=task.api_name, params={"texture": "soft"})
        return Action(kind="generate", text="B" if self.env.seed % 2 == 0 else "A")  # trial 1 gets the QA probe wrong


def scripted_backend(rest: str, **_options) -> ScriptedBackend:
    """The `scripted:<name>` model string: a backend that is never called by EchoAgent."""
    return ScriptedBackend([], model_id=f"scripted:{rest}")


@pytest.fixture(autouse=True)
def _registered():
    registry.register("agents", "ray-echo", "tests.run.test_ray_executor:EchoAgent")
    registry.register("backends", "scripted", "tests.run.test_ray_executor:scripted_backend")


@pytest.fixture(scope="module")
def ray_cluster():
    """One local Ray of 2 CPUs for the module; the executor joins it rather than starting its own."""
    ray = pytest.importorskip("ray", reason="install iba[ray] for the Ray executor tests")
    ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1", logging_level="WARNING",
             runtime_env={"env_vars": {"PYTHONPATH": str(REPO)}})  # workers import tests.run.*
    yield ray
    ray.shutdown()


def _cfg(**kw) -> RunConfig:
    return RunConfig(**{"agents": ["ray-echo"], "progress": False, "qa": True, "trials": 3, **kw})


def _ray(ds, store, cfg, *, backend=None, judges=(), workers=2, recipe_options=None):
    from iba.run.ray_executor import BackendRecipe, RayOptions, run_dataset_ray

    backend = backend or scripted_backend("t")
    recipe = BackendRecipe(backend.model_id, dict(recipe_options or {}))
    return asyncio.run(run_dataset_ray(ds, backend, store, cfg, judges=judges,
                                       recipe=recipe, options=RayOptions(workers=workers)))


def _local(ds, store, cfg, *, backend=None, judges=()):
    return asyncio.run(run_dataset(ds, backend or scripted_backend("t"), store, cfg, judges=judges))


def _records(store: Store) -> dict[str, tuple]:
    """Each record's identity and what the agent did (its trace without the step timings and the
    prompt tokens served from a process's live model state: both depend on which process ran what
    before, not on what the agent did)."""
    def action(r):
        if r.action is None:
            return None
        trace = [t.model_copy(update={"latency_s": 0.0, "reused_prompt_tokens": 0}) for t in r.action.trace]
        return r.action.model_copy(update={"trace": trace}).model_dump_json()

    return {r.key: (r.instance_id, r.agent, r.trial, r.status, action(r)) for r in store.runs()}


def _scores(store: Store) -> dict[tuple, tuple]:
    return {(s.run_key, s.scorer, s.repeat): (s.score, s.failure, [v.passed for v in s.verdicts])
            for s in store.scores()}


def _one_record_per_key(path: Path) -> list[str]:
    db = sqlite3.connect(path)
    try:
        keys = [k for (k,) in db.execute("SELECT key FROM runs")]
        assert not db.execute("SELECT 1 FROM claims").fetchall()  # nothing left claimed
    finally:
        db.close()
    assert len(keys) == len(set(keys))
    return keys


class InterruptAfter(Store):
    """A store whose n-th stored record is followed by a real Ctrl-C (SIGINT) in the driver:
    asyncio.run cancels the run at its next await and raises KeyboardInterrupt, as in a terminal.
    (Raising KeyboardInterrupt inside a task instead trips a CPython 3.11.7 bug that breaks the
    next ast.parse in the process, and with it tests/test_layering.py.)"""

    def __init__(self, path, n: int) -> None:
        super().__init__(path)
        self.left = n

    def __enter__(self):
        # a terminal's Ctrl-C meets Python's own handler (which asyncio.run turns into a cancel); a
        # library loaded by an earlier test may have left another one installed
        self._sigint = signal.signal(signal.SIGINT, signal.default_int_handler)
        return super().__enter__()

    def __exit__(self, *exc):
        signal.signal(signal.SIGINT, self._sigint)
        return super().__exit__(*exc)

    def put_run(self, rec):
        stored = super().put_run(rec)
        self.left -= 1
        if self.left == 0:
            signal.raise_signal(signal.SIGINT)
        return stored


def test_ray_gives_the_local_records_and_scores(ray_cluster, tmp_path):
    ds = Dataset(tiny_dataset(tmp_path / "ds"))
    cfg = _cfg(concurrency=2)
    with Store(tmp_path / "ray.sqlite") as a, Store(tmp_path / "local.sqlite") as b:
        s = _ray(ds, a, cfg)
        t = _local(ds, b, cfg)
        assert (s.planned, s.ok, s.skipped, s.errored) == (9, 9, 0, 0)
        assert (t.planned, t.ok) == (9, 9)
        assert _records(a) == _records(b) and len(_records(a)) == 9
        assert _scores(a) == _scores(b)
        # trial 1 answers the QA probe wrongly: equal scores are not all the same score by construction
        assert {sc[0] for sc in _scores(a).values()} == {0.0, 1.0}
        again = _ray(ds, a, cfg)  # resume under Ray: everything is stored, nothing runs
        assert (again.skipped, again.ok) == (9, 0)


@pytest.mark.slow
def test_ray_gives_the_local_records_and_scores_on_the_real_model(ray_cluster, smollm_gguf, tmp_path):
    """The real path: each worker loads SmolLM2 and MiniLM itself, builds its retrieval indexes and
    writes the shared response cache; the driver judges with the same model. The local executor,
    on the same cache, then reproduces every record and score."""
    from iba.llm import resolve_backend

    ds = Dataset(tiny_dataset(tmp_path / "ds"))
    cache = tmp_path / "cache"
    backend = resolve_backend("local:smollm2-135m", cache_dir=cache, use_cache=True)
    cfg = _cfg(agents=["rag?max_tokens=32"], trials=2, cache_dir=cache)
    with Store(tmp_path / "ray.sqlite") as a, Store(tmp_path / "local.sqlite") as b:
        # the workers build their own backend on the test's response cache (not ~/.cache/iba)
        s = _ray(ds, a, cfg, backend=backend, judges=[backend], recipe_options={"cache_dir": str(cache)})
        assert (s.planned, s.errored) == (6, 0) and s.ok + s.failed == 6
        assert s.usage.llm_calls >= 6  # the workers really ran the model (the cache was empty)
        assert list((cache / "index").glob("*.npz"))  # ... and wrote the index cache the local run reads
        t = _local(ds, b, cfg, backend=backend, judges=[backend])
        assert (t.planned, t.ok, t.failed) == (6, s.ok, s.failed)
        assert _records(a) == _records(b) and len(_records(a)) == 6
        assert _scores(a) == _scores(b)
        assert any(key[1].startswith("judge:") for key in _scores(a))  # the driver's judge scored them


@pytest.mark.parametrize("first,then", [("ray", "local"), ("local", "ray")])
def test_interrupted_under_one_executor_finishes_under_the_other(ray_cluster, tmp_path, first, then):
    ds = Dataset(tiny_dataset(tmp_path / "ds"))
    cfg = _cfg()
    run = {"ray": _ray, "local": _local}
    with InterruptAfter(tmp_path / "s.sqlite", 2) as store, pytest.raises(KeyboardInterrupt):
        run[first](ds, store, cfg)
    with Store(tmp_path / "s.sqlite") as store:
        stored = len(list(store.runs()))
        assert 2 <= stored < 9, "the interrupt came too late to leave work undone"
        s = run[then](ds, store, cfg)
        assert (s.planned, s.skipped, s.ok) == (9, stored, 9 - stored)
        with Store(tmp_path / "fresh.sqlite") as fresh:
            _local(ds, fresh, cfg)
            assert _records(store) == _records(fresh)
            assert _scores(store) == _scores(fresh)  # the records stored before the interrupt were scored too
    assert len(_one_record_per_key(tmp_path / "s.sqlite")) == 9


@pytest.mark.parametrize("deaths", [1, 2])
def test_a_worker_that_dies_is_restarted_and_its_item_sent_again_once(ray_cluster, tmp_path, deaths):
    """One death: Ray restarts the worker and the item runs again, ok. A death on both attempts:
    an errored record, the run goes on, and --retry-errored (here under the local executor) reruns it."""
    from iba.run.ray_executor import TASK_RETRIES

    ds = Dataset(tiny_dataset(tmp_path / "ds"))
    marker = tmp_path / "deaths"
    cfg = _cfg(agents=[f"ray-echo?die=i0&deaths={deaths}&marker={marker}"], trials=1)
    with Store(tmp_path / "s.sqlite") as store:
        s = _ray(ds, store, cfg, workers=1)  # one worker: no other to hide a death
        recs = {(r.instance_id, r.probe): r for r in store.runs()}
        assert len(marker.read_text().split()) == min(deaths, 1 + TASK_RETRIES)
        assert all(r.status == "ok" for item, r in recs.items() if item != ("i0", None))  # the restarted worker ran them
        if deaths <= TASK_RETRIES:
            assert (s.planned, s.ok, s.errored) == (3, 3, 0)
            return
        assert (s.planned, s.ok, s.errored) == (3, 2, 1)
        assert recs[("i0", None)].status == "errored" and "Ray worker died" in recs[("i0", None)].error
        again = _local(ds, store, dataclasses.replace(cfg, retry_errored=True))
        assert (again.retried, again.ok, again.errored) == (1, 1, 0)
    assert len(_one_record_per_key(tmp_path / "s.sqlite")) == 3


def test_a_worker_that_cannot_start_stops_the_run_before_any_item(ray_cluster, tmp_path):
    from iba.run.ray_executor import BackendRecipe, RayError, run_dataset_ray

    ds = Dataset(tiny_dataset(tmp_path / "ds"))
    with Store(tmp_path / "s.sqlite") as store:
        run = run_dataset_ray(ds, scripted_backend("t"), store, _cfg(), recipe=BackendRecipe("nope:t"))
        with pytest.raises(RayError, match=r"could not start \(nothing was run\): ValueError: unknown model string 'nope:t'"):
            asyncio.run(run)
        assert list(store.runs()) == []
    _one_record_per_key(tmp_path / "s.sqlite")  # and no claim left behind


def _cli(ds: Path, store: Path, *extra: str) -> int:
    return main(["run", str(ds), "--model", "scripted:t", "--agent", "ray-echo", "--store", str(store),
                 "--cache-dir", str(store.parent / "cache"), "--judges", "none", "--qa", "--quiet", *extra])


def test_cli_executor_ray_stores_what_the_local_cli_stores(ray_cluster, tmp_path, capsys):
    ds = tiny_dataset(tmp_path / "ds")
    assert _cli(ds, tmp_path / "ray.sqlite", "--executor", "ray", "--workers", "2") == 0
    assert "3 planned, 0 already stored, 3 ok" in capsys.readouterr().out
    assert _cli(ds, tmp_path / "local.sqlite") == 0
    with Store(tmp_path / "ray.sqlite") as a, Store(tmp_path / "local.sqlite") as b:
        assert _records(a) == _records(b) and _scores(a) == _scores(b) and len(_records(a)) == 3


def test_cli_executor_ray_without_ray_says_what_to_install(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    ds = tiny_dataset(tmp_path / "ds")
    assert _cli(ds, tmp_path / "s.sqlite", "--executor", "ray") == 2
    assert "install iba[ray]" in capsys.readouterr().err
    assert not (tmp_path / "s.sqlite").exists()  # stopped before the store was opened


def test_cli_ray_options_need_the_ray_executor(tmp_path, capsys):
    ds = tiny_dataset(tmp_path / "ds")
    assert _cli(ds, tmp_path / "s.sqlite", "--ray-address", "auto") == 2
    assert "--ray-address: only with --executor ray" in capsys.readouterr().err
