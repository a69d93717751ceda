"""`--embedder openai:MODEL --embed-base-url URL` in `iba index`, `iba run` (local and Ray executors) and
`iba eval-retrieval`, against a real `iba serve-embeddings`: the run reads what `iba index` wrote, a record
names the model and never a URL, a server that is down errors the items (not fails them), and bad
options are refused before any work with what to fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from iba import registry
from iba.cli import main
from iba.retrieval import index as index_mod
from iba.run.store import Store
from tests.fakes import ScriptedBackend
from tests.run.helpers import tiny_dataset

REPO = Path(__file__).resolve().parents[2]


def _answer(messages, kwargs):
    return {"texture": "soft"} if kwargs.get("json_schema") else "A short answer."


def scripted(rest: str, **_options) -> ScriptedBackend:
    """`--model scripted:NAME`: answers every call at once (the embedder is what is tested here)."""
    return ScriptedBackend(_answer, model_id=f"scripted:{rest}")


@pytest.fixture(autouse=True)
def _setup(monkeypatch):
    registry.register("backends", "scripted", "tests.commands.test_embedder_options:scripted")
    for var in ("IBA_EMBED_API_KEY", "OPENAI_API_KEY", "IBA_EMBED_BASE_URL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    index_mod.clear_memory_cache()
    yield
    index_mod.clear_memory_cache()


def _files(cache: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in (cache / "index").glob("*.npz")}


def _run(ds: Path, store: Path, url: str, *extra: str) -> int:
    return main(["run", str(ds), "--model", "scripted:t", "--agent", "rag", "--store", str(store), "--judges", "none",
                 "--cache-dir", str(store.parent / "cache"), "--quiet", "--embedder", "openai:minilm",
                 "--embed-base-url", url, *extra])


def test_index_then_run_through_the_server(embeddings_server, tmp_path, capsys):
    ds = tiny_dataset(tmp_path / "ds")
    cache = tmp_path / "cache"
    assert main(["index", str(ds), "--cache-dir", str(cache), "--unit", "token", "--quiet",
                 "--embedder", "openai:minilm", "--embed-base-url", embeddings_server]) == 0
    assert "1 embedded" in capsys.readouterr().out
    before = _files(cache)
    assert len(before) == 1
    assert _run(ds, tmp_path / "s.sqlite", embeddings_server) == 0
    assert "2 ok, 0 failed (scored 0), 0 errored" in capsys.readouterr().out
    assert _files(cache) == before  # the run read the index `iba index` wrote
    with Store(tmp_path / "s.sqlite") as s:
        recs = list(s.runs())
    steps = [st for r in recs for st in r.action.trace if st.step == "build_index"]
    assert steps and all(st.inputs["embedder"] == "openai:minilm" for st in steps)
    port = embeddings_server.rsplit(":", 1)[1].split("/")[0]
    assert all(port not in r.model_dump_json() for r in recs)  # no URL in any record


def test_a_server_that_is_down_errors_the_items(tmp_path, capsys):
    ds = tiny_dataset(tmp_path / "ds")
    # a closed port; few retries so the test is quick (the option is the spec's own)
    assert main(["run", str(ds), "--model", "scripted:t", "--agent", "rag", "--store", str(tmp_path / "s.sqlite"),
                 "--judges", "none", "--cache-dir", str(tmp_path / "cache"), "--quiet",
                 "--embedder", "openai:minilm?max_retries=0", "--embed-base-url", "http://127.0.0.1:9/v1"]) == 1
    out, err = capsys.readouterr()
    assert "0 ok, 0 failed (scored 0), 2 errored" in out and "connection" in err
    with Store(tmp_path / "s.sqlite") as s:
        assert {r.status for r in s.runs()} == {"errored"}


def test_index_with_the_server_down_says_so_and_exits_1(tmp_path, capsys):
    ds = tiny_dataset(tmp_path / "ds")
    assert main(["index", str(ds), "--cache-dir", str(tmp_path / "c"), "--quiet",
                 "--embedder", "openai:minilm?max_retries=0", "--embed-base-url", "http://127.0.0.1:9/v1"]) == 1
    assert "connection" in capsys.readouterr().err


def test_eval_retrieval_through_the_server(embeddings_server, tmp_path, capsys):
    ds = tiny_dataset(tmp_path / "ds")
    args = ["eval-retrieval", str(ds), "--json", "--cache-dir", str(tmp_path / "c")]
    assert main([*args, "--embedder", "openai:minilm", "--embed-base-url", embeddings_server]) == 0
    remote = json.loads(capsys.readouterr().out)
    assert main([*args, "--embedder", "minilm"]) == 0
    assert json.loads(capsys.readouterr().out) == remote  # the same recall as the in-process MiniLM


@pytest.mark.parametrize("extra, words", [
    (["--embedder", "minilm", "--embed-base-url", "http://127.0.0.1:9/v1"],
     "--embed-base-url: only with --embedder openai:MODEL"),
    (["--embedder", "openai"], "needs a model name: openai:MODEL"),
    (["--embedder", "openai:m", "--embed-base-url", "http//typo/v1"], "is not an http:// or https:// URL"),
    (["--embedder", "openai:m", "--embed-base-url", "https://api.example.com/v1"], "set IBA_EMBED_API_KEY"),
    (["--embedder", "openai:m?batch=0", "--embed-base-url", "http://127.0.0.1:9/v1"], "batch must be a positive integer"),
])
@pytest.mark.parametrize("command", ["run", "index", "eval-retrieval"])
def test_bad_embedder_options_stop_before_any_work(command, extra, words, tmp_path, capsys):
    ds = tiny_dataset(tmp_path / "ds")
    argv = {"run": ["run", str(ds), "--model", "scripted:t", "--store", str(tmp_path / "s.sqlite")],
            "index": ["index", str(ds)], "eval-retrieval": ["eval-retrieval", str(ds)]}[command]
    assert main([*argv, "--cache-dir", str(tmp_path / "c"), *extra]) == 2
    assert words in capsys.readouterr().err
    assert not (tmp_path / "s.sqlite").exists() and not (tmp_path / "c" / "index").exists()


def test_an_endpoints_file_error_names_its_line(tmp_path, capsys):
    ds = tiny_dataset(tmp_path / "ds")
    eps = tmp_path / "eps.txt"
    eps.write_text("# two replicas\nhttp://127.0.0.1:9/v1\nnot a url\n")
    assert main(["index", str(ds), "--embedder", "openai:m", "--embed-endpoints", str(eps)]) == 2
    assert f"{eps}:3:" in capsys.readouterr().err


@pytest.fixture(scope="module")
def ray_cluster():
    ray = pytest.importorskip("ray", reason="install iba[ray] for the Ray executor")
    ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1", logging_level="WARNING",
             runtime_env={"env_vars": {"PYTHONPATH": str(REPO)}})  # workers import this module's backend
    yield ray
    ray.shutdown()


@pytest.mark.slow
def test_ray_workers_get_the_endpoint_settings(ray_cluster, embeddings_server, tmp_path, capsys):
    """Each worker builds its own client from the settings the spec carries (none is pickled live)."""
    ds = tiny_dataset(tmp_path / "ds")
    assert main(["index", str(ds), "--cache-dir", str(tmp_path / "ray" / "cache"), "--unit", "token", "--quiet",
                 "--executor", "ray", "--embedder", "openai:minilm", "--embed-base-url", embeddings_server]) == 0
    assert "1 embedded" in capsys.readouterr().out
    before = _files(tmp_path / "ray" / "cache")
    assert _run(ds, tmp_path / "ray" / "s.sqlite", embeddings_server, "--executor", "ray", "--workers", "2") == 0
    assert "2 ok, 0 failed (scored 0), 0 errored" in capsys.readouterr().out
    assert _files(tmp_path / "ray" / "cache") == before
    assert _run(ds, tmp_path / "local" / "s.sqlite", embeddings_server) == 0
    with Store(tmp_path / "ray" / "s.sqlite") as a, Store(tmp_path / "local" / "s.sqlite") as b:
        ra = {r.instance_id: r.action.model_dump(exclude={"trace"}) for r in a.runs()}
        rb = {r.instance_id: r.action.model_dump(exclude={"trace"}) for r in b.runs()}
    assert ra == rb and len(ra) == 2
