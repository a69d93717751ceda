"""build -> export -> load with `datasets` -> `iba run` on the export scores what a run on the folder
scores (real embedded model, slow)."""

from __future__ import annotations

import sqlite3

import pytest

datasets = pytest.importorskip("datasets")

from iba.cli import main  # noqa: E402

pytestmark = pytest.mark.slow


def scores(store) -> dict:
    db = sqlite3.connect(store)
    out = {}
    for key, scorer, repeat, record in db.execute("SELECT run_key, scorer, repeat, record FROM scores"):
        import json

        rec = json.loads(record)
        out[(key, scorer, repeat)] = (rec["score"], [v["passed"] for v in rec["verdicts"]])
    return out


def test_run_on_the_export_scores_what_the_folder_scores(tmp_path, smollm_gguf, capsys):
    ds, out = tmp_path / "ds", tmp_path / "hf"
    assert main(["build", "--preset", "demo", "--out", str(ds)]) == 0
    assert main(["export", "hf", str(ds), str(out)]) == 0
    assert len(datasets.load_dataset(str(out), "instances", split="test")) == 6
    common = ["--model", "local:smollm2-135m", "--no-cache", "--quiet", "--agent", "rag?max_tokens=48", "--limit", "2"]
    assert main(["run", str(ds), *common, "--store", str(tmp_path / "folder.sqlite"),
                 "--cache-dir", str(tmp_path / "c1")]) == 0
    capsys.readouterr()
    assert main(["run", str(out), *common, "--store", str(tmp_path / "export.sqlite"),
                 "--cache-dir", str(tmp_path / "c2")]) == 0
    hint = capsys.readouterr().out
    assert "hf-datasets" in hint  # the report hint names the folder read back, which `iba report` reads
    a, b = scores(tmp_path / "folder.sqlite"), scores(tmp_path / "export.sqlite")
    assert a and a == b  # same run keys (same manifest), same verdicts
    assert {s for (_, s, _) in a} >= {"slots", "judge:local:smollm2-135m"}
