"""build -> run -> score -> report through the CLI, on the real embedded model (SmolLM2 for speed)."""

import json
import sqlite3

import pytest

from iba.cli import main

pytestmark = pytest.mark.slow


def test_build_run_score_report(tmp_path, smollm_gguf, capsys):
    ds, store, out = tmp_path / "ds", tmp_path / "runs.sqlite", tmp_path / "report"
    assert main(["build", "--preset", "demo", "--out", str(ds)]) == 0
    common = [str(ds), "--model", "local:smollm2-135m", "--store", str(store), "--no-cache",
              "--cache-dir", str(tmp_path / "cache"), "--quiet"]
    # one generate and one call_api instance (the demo interleaves the two scenarios per persona)
    # rag only: `direct` puts the whole history in the prompt, minutes per call on 2 cores
    agents = ["--agent", "rag?max_tokens=48", "--qa", "--qa-per-instance", "1"]
    assert main(["run", *common, *agents, "--limit", "2"]) == 0
    db = sqlite3.connect(store)
    runs = [json.loads(r) for (r,) in db.execute("SELECT record FROM runs")]
    tasks = [r for r in runs if r["probe"] is None]
    assert len(tasks) == 2 and {r["agent"] for r in tasks} == {"rag?max_tokens=48"}
    assert any(r["probe"] for r in runs)
    for r in tasks:  # every stored action carries its trace and prompt hashes, or is an honest error
        assert r["status"] != "errored" or r["action"] is None
        assert r["status"] != "ok" or r["action"] is not None
        if r["action"]:
            assert r["action"]["trace"] and r["prompt_hashes"]
    scorers = {s for (s,) in db.execute("SELECT scorer FROM scores")}
    assert "judge:local:smollm2-135m" in scorers and "qa" in scorers
    # a rerun resumes: nothing new is run
    capsys.readouterr()
    assert main(["run", *common, *agents, "--limit", "2"]) == 0
    assert " 0 ok, 0 failed (scored 0), 0 errored" in capsys.readouterr().out
    assert main(["report", str(store), "--dataset", str(ds), "--out", str(out)]) == 0
    html = (out / "report.html").read_text()
    assert "Overall" in html and "rag?max_tokens=48" in html
    assert len(list(out.glob("*.png"))) >= 2 and (out / "table4.csv").exists()
