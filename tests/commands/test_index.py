"""`iba index DATASET`: the index files it writes are the ones the agents read, so a run after it
embeds no history; a pool of processes (or Ray tasks) writes the same files as one process.

The demo preset's four histories (850 turns) with a hashed bag-of-words embedder: the plumbing is
what is tested, not MiniLM (tests/retrieval/test_index.py covers the real embedder and the cache)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import numpy as np
import pytest

from iba import registry
from iba.cli import main
from iba.dataset import Dataset
from iba.retrieval import index as index_mod
from iba.retrieval.evaluate import sample_users
from iba.run.runner import RunConfig, run_dataset
from iba.run.store import Store
from tests.fakes import ScriptedBackend

REPO = Path(__file__).resolve().parents[2]
EMBEDDER = "test-hash"


@pytest.fixture(autouse=True)
def _hash_embedder():
    registry.register("embedders", EMBEDDER, "tests.retrieval.helpers:HashEmbedder")
    index_mod.clear_memory_cache()  # every test reads the disk cache, not an earlier test's indexes
    yield
    index_mod.clear_memory_cache()


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    ds = tmp_path_factory.mktemp("demo") / "ds"
    assert main(["build", "--preset", "demo", "--out", str(ds)]) == 0
    return ds


def _index(ds: Path, cache: Path, *extra: str) -> int:
    """`iba index` for token windows (rag's unit) unless the test names another unit."""
    unit = [] if "--unit" in extra else ["--unit", "token"]
    return main(["index", str(ds), "--cache-dir", str(cache), "--embedder", EMBEDDER, *unit, *extra])


def _files(cache: Path) -> dict[str, tuple[int, int]]:
    return {p.name: (p.stat().st_mtime_ns, p.stat().st_size) for p in sorted((cache / "index").glob("*.npz"))}


def _summary(out: str) -> tuple[int, int, int]:
    m = re.search(r"(\d+) histories \((\d+) turns\): (\d+) embedded .*?(\d+) already in the cache", out)
    assert m, out
    return int(m[1]), int(m[3]), int(m[4])


def _answer(messages, kwargs):
    # a call_api task asks for JSON to the API schema (the demo's one food_ordering API); a generate task for text
    params = {"cuisine": "japanese", "spice_level": "none", "texture": "soft", "delivery_time": "19:00", "servings": 2}
    return params if kwargs.get("json_schema") else "A short answer."


def test_a_run_after_iba_index_embeds_no_history(demo, tmp_path, capsys, monkeypatch):
    cache = tmp_path / "cache"
    assert _index(demo, cache) == 0
    out, err = capsys.readouterr()
    assert _summary(out) == (4, 4, 0) and "turns/s" in out
    assert "turn/s" in err  # the progress bar counts turns
    before = _files(cache)
    assert len(before) == 4

    def no_embedding(*a, **k):
        raise AssertionError("the run embedded a history that `iba index` had built")

    monkeypatch.setattr(index_mod.HistoryIndex, "_embed", classmethod(no_embedding))
    ds = Dataset(demo)
    cfg = RunConfig(agents=["rag"], embedder=EMBEDDER, cache_dir=cache, score=False, progress=False)
    with Store(tmp_path / "s.sqlite") as store:
        s = asyncio.run(run_dataset(ds, ScriptedBackend(_answer), store, cfg))
        recs = list(store.runs())
    assert (s.planned, s.ok) == (6, 6), [r.error for r in recs if r.error]
    used = {step.outputs["key"] for r in recs for step in r.action.trace if step.step == "build_index"}
    assert {f"{k}.npz" for k in used} == set(before)  # every history of the run, read from the cache
    assert _files(cache) == before  # and nothing rewritten


def test_the_default_unit_serves_iba_and_rag(demo, tmp_path, capsys):
    """The default (mixed, iba's) caches the mixed index and, under their own key, rag's token windows."""
    cache = tmp_path / "cache"
    assert main(["index", str(demo), "--cache-dir", str(cache), "--embedder", EMBEDDER, "--quiet"]) == 0
    assert "mixed units" in capsys.readouterr().out and len(_files(cache)) == 8
    assert _index(demo, cache, "--quiet") == 0  # the token windows are there already
    assert _summary(capsys.readouterr().out) == (4, 0, 4)


def test_index_again_embeds_nothing(demo, tmp_path, capsys):
    cache = tmp_path / "cache"
    assert _index(demo, cache, "--quiet") == 0
    first = _files(cache)
    capsys.readouterr()
    assert _index(demo, cache, "--quiet") == 0
    out = capsys.readouterr().out
    assert _summary(out) == (4, 0, 4) and "nothing to embed" in out
    assert _files(cache) == first


def _vectors(cache: Path) -> dict[str, tuple]:
    out = {}
    for p in sorted((cache / "index").glob("*.npz")):
        with np.load(p, allow_pickle=False) as data:
            out[p.name] = (data["vectors"].tobytes(), str(data["chunks"]))
    return out


def test_two_processes_write_the_files_of_one(demo, tmp_path, capsys):
    assert _index(demo, tmp_path / "one", "--quiet") == 0
    assert _index(demo, tmp_path / "two", "--quiet", "--processes", "2") == 0
    out = capsys.readouterr().out
    assert "with 2 processes" in out and _summary(out) == (4, 4, 0)
    one, two = _vectors(tmp_path / "one"), _vectors(tmp_path / "two")
    assert one == two and len(one) == 4
    assert not list((tmp_path / "two" / "index").glob("*.tmp"))  # no half-written entries left


def test_users_takes_eval_retrievals_sample_and_options_reach_the_key(demo, tmp_path, capsys):
    assert _index(demo, tmp_path / "c", "--quiet", "--users", "2", "--seed", "7") == 0
    assert _summary(capsys.readouterr().out)[0] == 2
    ds = Dataset(demo)
    users = {t.user_id for t in sample_users(list(ds.instances), 2, 7)}
    keys = {index_mod.history_key(ds.history(u), EMBEDDER, "token", 256, 50) for u in users}
    assert {f"{k}.npz" for k in keys} == set(_files(tmp_path / "c"))
    # another chunking is another entry: a run with rag?unit=turn would not find these
    assert _index(demo, tmp_path / "c", "--quiet", "--users", "2", "--seed", "7", "--unit", "turn") == 0
    assert _summary(capsys.readouterr().out)[1:] == (2, 0) and len(_files(tmp_path / "c")) == 4


def test_bad_arguments_say_what_to_fix(demo, tmp_path, capsys):
    assert main(["index", str(demo), "--embedder", "nope", "--cache-dir", str(tmp_path)]) == 2
    assert "unknown embedder 'nope'" in capsys.readouterr().err
    assert main(["index", str(tmp_path / "missing"), "--cache-dir", str(tmp_path)]) == 2
    assert "not an IBA dataset" in capsys.readouterr().err
    assert _index(demo, tmp_path, "--ray-address", "auto") == 2
    assert "only with --executor ray" in capsys.readouterr().err


def test_ray_tasks_write_the_files_of_one_process(demo, tmp_path, capsys):
    ray = pytest.importorskip("ray", reason="install iba[ray] for the Ray executor")
    assert _index(demo, tmp_path / "one", "--quiet") == 0
    ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1", logging_level="WARNING",
             runtime_env={"env_vars": {"PYTHONPATH": str(REPO)}})  # the tasks import tests.retrieval.helpers
    try:
        assert _index(demo, tmp_path / "ray", "--quiet", "--executor", "ray") == 0
    finally:
        ray.shutdown()
    assert "with Ray" in capsys.readouterr().out
    assert _vectors(tmp_path / "one") == _vectors(tmp_path / "ray")
