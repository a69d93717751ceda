"""The memory systems in examples/ on the real packaged model, served by `python -m llama_cpp.server`
(slow): the notes memory over cmd= (sandboxed) and url= (with embeddings), and mem0 end to end
on a demo user beside `rag`, its score in the report."""

from __future__ import annotations

import csv
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from iba.agents import sandbox as bwrap
from iba.cli import main
from iba.run.store import Store
from tests.agents.test_memory import _free_port, wait_port
from tests.run.helpers import users_dataset

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
NOTES = ROOT / "examples" / "notes_memory.py"
MEM0 = ROOT / "examples" / "mem0_memory.py"
SANDBOX = "bwrap" if bwrap.unavailable() is None else "none"


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    ds = tmp_path_factory.mktemp("demo") / "ds"
    assert main(["build", "--preset", "demo", "--out", str(ds)]) == 0
    return ds


@pytest.fixture(scope="module")
def short_demo(tmp_path_factory) -> Path:
    """The demo preset with 30-turn histories (its evidence kept): u0003, a CallAPI user, has 3 sessions."""
    ds = tmp_path_factory.mktemp("demo30") / "ds"
    assert main(["build", "--preset", "demo", "--history-turns", "30", "--out", str(ds)]) == 0
    return ds


def _run(ds: Path, store: Path, *args: str) -> int:
    return main(["run", str(ds), "--store", str(store), "--quiet", "--cache-dir", str(store.parent / "cache"), *args])


def test_notes_memory_in_the_sandbox(demo, qwen_servers, tmp_path):
    """u0002 of the demo: 3 sessions, one generate task. One LLM call per session, one per act,
    each reported by the memory and stored apart."""
    store = tmp_path / "notes.sqlite"
    spec = f"memory?cmd=python {NOTES} --base-url {qwen_servers['chat']} --model qwen&network=true"
    assert _run(demo, store, "--agent", spec, "--user", "u0002", "--judges", "none") == 0
    with Store(store) as s:
        (ingest,) = s.ingests()
        (rec,) = list(s.runs())
    assert (ingest.status, ingest.sessions, ingest.ingested, ingest.sandbox) == ("ok", 3, 3, SANDBOX)
    assert ingest.usage.llm_calls == 3 and ingest.usage.prompt_tokens > 300 and ingest.usage.completion_tokens > 0
    assert rec.status == "ok" and rec.action.text.strip() and rec.sandbox == SANDBOX
    assert rec.usage.llm_calls == 1 and rec.usage.prompt_tokens > 0  # the act: one call, its tokens


def test_notes_memory_over_url_with_embeddings(qwen_servers, tmp_path):
    ds = users_dataset(tmp_path / "ds", users=2, sessions=2)
    port = _free_port()
    server = subprocess.Popen([sys.executable, str(NOTES), "--serve", str(port), "--base-url", qwen_servers["chat"],
                               "--model", "qwen", "--embed-base-url", qwen_servers["embed"], "--embed-model", "qwen-embed"])
    try:
        wait_port(port)
        store = tmp_path / "s.sqlite"
        _run(ds, store, "--agent", f"memory?url=http://127.0.0.1:{port}", "--judges", "none", "--concurrency", "2")
        with Store(store) as s:
            ingests, recs = s.ingests(), list(s.runs())
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert sorted(i.user_id for i in ingests) == ["u0", "u1"]
    assert all(i.status == "ok" and i.usage.llm_calls == 2 for i in ingests)  # one call per session
    assert len(recs) == 4 and all(r.status in ("ok", "failed") for r in recs)  # failed: the 0.5B's own params
    assert all(r.usage.llm_calls == 1 for r in recs if r.status == "ok")


def test_mem0_runs_a_demo_user_end_to_end_beside_rag(short_demo, qwen_servers, tmp_path):
    """mem0's own Memory (in-memory Qdrant, the local chat and embeddings servers, telemetry off)
    ingests u0003's 3 sessions and answers its CallAPI task; rag runs on the same task; both are
    scored (slot matching) and stand side by side in the report, ingest cost beside act cost."""
    demo = short_demo
    # found, not imported: importing mem0 here would start its telemetry client in this process
    if importlib.util.find_spec("mem0") is None:
        pytest.skip("mem0ai is not installed: pip install 'iba[mem0]'")
    store = tmp_path / "mem0.sqlite"
    mem0 = (f"memory?cmd=python {MEM0} --base-url {qwen_servers['chat']} --model qwen "
            f"--embed-base-url {qwen_servers['embed']} --embed-model qwen-embed&network=true&ingest_timeout=1800")
    assert _run(demo, store, "--agent", "rag", "--agent", mem0, "--user", "u0003", "--model", "openai:qwen",
                "--base-url", qwen_servers["chat"], "--judges", "none") == 0
    with Store(store) as s:
        (ingest,) = s.ingests()
        recs = {r.agent: r for r in s.runs()}
        score = {a: s.get_score(r.key, "slots") for a, r in recs.items()}
    assert (ingest.status, ingest.sessions, ingest.ingested) == ("ok", 3, 3), ingest.error
    assert ingest.usage.llm_calls >= 3 and ingest.usage.prompt_tokens > 3 * 6000  # mem0's ~8k-token prompt per add
    act = recs[mem0]
    assert act.status in ("ok", "failed") and act.usage.llm_calls == 1
    if act.status == "ok":
        search = next(st for st in act.action.trace if st.step == "mem0-search").outputs
        assert search["refused_connections"] == []  # mem0 tried no connection but the model endpoints
    assert all(score[a] is not None and 0.0 <= score[a].score <= 1.0 for a in recs)

    out = tmp_path / "report"
    assert main(["report", str(store), "--dataset", str(demo), "--out", str(out)]) == 0
    table4 = (out / "table4.md").read_text()
    assert "| rag (openai:qwen)" in table4 and f"| {mem0} (own model)" in table4
    with (out / "cost.csv").open() as f:
        cost = {row["Agent (model)"]: row for row in csv.DictReader(f)}
    row = cost[f"{mem0} (own model)"]
    assert row["users ingested"] == "1" and int(row["ingest LLM calls"]) == ingest.usage.llm_calls
    assert cost["rag (openai:qwen)"]["users ingested"] == ""

