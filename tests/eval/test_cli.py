"""`iba score` end to end on stored runs (verifiers, slots and QA only: no model needed)."""

from __future__ import annotations

from iba.cli import main
from iba.run.store import Store
from tests.report.fixed_store import build


def runs_only_store(tmp_path):
    ds, full, _ = build(tmp_path)
    path = tmp_path / "fresh.sqlite"
    with Store(full) as src, Store(path) as dst:
        for r in src.runs():
            dst.put_run(r)
    return ds, path


def test_score_command_scores_and_resumes(tmp_path, capsys):
    ds, store = runs_only_store(tmp_path)
    assert main(["score", str(store), "--dataset", str(ds), "--judges", "none", "--quiet"]) == 0
    out = capsys.readouterr().out
    with Store(store) as s:
        recs = list(s.scores())
    by = {}
    for r in recs:
        by.setdefault(r.scorer, []).append(r)
    # 3 agents x 2 call_api instances; the stored params {"p1": "x"} are not a valid order_food call
    assert len(by["slots"]) == 6
    assert sorted(str(r.score) for r in by["slots"]) == ["0.0"] * 5 + ["None"]  # rag d2 errored: unscored
    assert all(r.invalid_action for r in by["slots"] if r.score is not None)
    assert sorted(r.score for r in by["qa"]) == [0.0, 1.0]
    assert len(by["verifiers"]) == 3 and all(r.score == 1.0 for r in by["verifiers"])  # the response has a table
    assert "11 new score records" in out and "slots: 6 new, 1 unscored" in out
    # a second run has nothing left to do
    assert main(["score", str(store), "--dataset", str(ds), "--judges", "none", "--quiet"]) == 0
    assert "0 new score records" in capsys.readouterr().out


def test_score_command_errors(tmp_path, capsys):
    assert main(["score", str(tmp_path / "none.sqlite"), "--dataset", str(tmp_path)]) == 2
    assert "no store" in capsys.readouterr().err
    ds, store = runs_only_store(tmp_path)
    assert main(["score", str(store), "--dataset", str(tmp_path / "nope"), "--judges", "none"]) == 2
    assert "not an IBA dataset" in capsys.readouterr().err


def test_default_judge_is_the_strongest_installed(tmp_path, capsys, monkeypatch):
    from iba.llm import models

    installed: set[str] = set()
    monkeypatch.setattr(models, "is_installed", lambda name: name in installed)
    assert models.strongest_installed_judge() is None
    installed.add("qwen2.5-coder-0.5b")
    assert models.strongest_installed_judge() == "local:qwen2.5-coder-0.5b"
    installed.add("qwen2.5-coder-1.5b")
    assert models.strongest_installed_judge() == "local:qwen2.5-coder-1.5b"
    # nothing installed: `iba score` says what to do instead of falling back to a model it cannot load
    installed.clear()
    ds, store = runs_only_store(tmp_path)
    assert main(["score", str(store), "--dataset", str(ds), "--quiet"]) == 2
    assert "no packaged judge model is installed" in capsys.readouterr().err


def test_is_installed_reads_the_real_packages():
    import pytest

    from iba.llm.models import is_installed

    assert is_installed("smollm2-135m")  # installed by `make install`
    with pytest.raises(KeyError):
        is_installed("no-such-model")
