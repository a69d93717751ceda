"""The batch path end to end on the real embedded model (slow): `iba run --batch` writes a round,
`iba batch answer --model local:...` answers it, the rerun replays and writes the next, until the
run exits 0; the scores equal a direct run's on the same instances."""

from __future__ import annotations

import json
import sqlite3

import pytest

from iba.cli import main

pytestmark = pytest.mark.slow


def scores(store) -> dict:
    db = sqlite3.connect(store)
    return {(k, s, r): (json.loads(rec)["score"], [v["passed"] for v in json.loads(rec)["verdicts"]])
            for k, s, r, rec in db.execute("SELECT run_key, scorer, repeat, record FROM scores")}


def test_batch_rounds_answered_offline_score_what_a_direct_run_scores(tmp_path, smollm_gguf, capsys):
    ds, batch = tmp_path / "ds", tmp_path / "batch"
    assert main(["build", "--preset", "demo", "--out", str(ds)]) == 0
    # one generate (judged) and one call_api instance
    common = [str(ds), "--model", "local:smollm2-135m", "--no-cache", "--quiet", "--agent", "rag?max_tokens=48",
              "--limit", "2"]
    statuses = []
    for _ in range(5):
        statuses.append(main(["run", *common, "--store", str(tmp_path / "batch.sqlite"),
                              "--cache-dir", str(tmp_path / "c1"), "--batch", str(batch)]))
        if statuses[-1] != 3:
            break
        assert main(["batch", "answer", str(batch), "--model", "local:smollm2-135m", "--no-cache", "--quiet",
                     "--cache-dir", str(tmp_path / "c2")]) == 0
    assert statuses == [3, 3, 0]  # the agent's round, the judge's round, done
    assert len(list(batch.glob("round-*/*.requests.jsonl"))) == 2
    out = capsys.readouterr().out
    assert "every call of this selection is answered" in out
    assert main(["run", *common, "--store", str(tmp_path / "direct.sqlite"), "--cache-dir", str(tmp_path / "c3")]) == 0
    a, b = scores(tmp_path / "batch.sqlite"), scores(tmp_path / "direct.sqlite")
    assert a and a == b
    assert {s for (_, s, _) in a} >= {"slots", "judge:local:smollm2-135m"}
