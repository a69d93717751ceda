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
    assert "nope: no such dataset folder" in capsys.readouterr().err


def test_best_judge_is_the_strongest_installed(tmp_path, capsys, monkeypatch):
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
    assert main(["score", str(store), "--dataset", str(ds), "--judges", "best", "--quiet"]) == 2
    assert "no packaged judge model is installed" in capsys.readouterr().err


def test_is_installed_reads_the_real_packages():
    import pytest

    from iba.llm.models import is_installed

    assert is_installed("smollm2-135m")  # installed by `make install`
    with pytest.raises(KeyError):
        is_installed("no-such-model")


# ---------------------------------------------------------------- judge faults, --rescore, bad input


def _scripted_judges(monkeypatch, state: dict):
    """`iba score --judges J` gets a scripted judge: down (every call an LLMError) while
    state["down"], else passing every checkpoint with state["passed"]."""
    import iba.commands.model_options as run_cmd
    from iba.llm.base import LLMError
    from tests.fakes import ScriptedBackend

    def reply(messages, kwargs):
        if state["down"]:
            return LLMError("J: request failed after 4 attempts (server_error, HTTP 503)")
        return {"passed": state["passed"], "rationale": "r"}

    monkeypatch.setattr(run_cmd, "backend_from_args", lambda model, args, judge=False: ScriptedBackend(reply, model_id=model))


def _judge_scores(store) -> list:
    with Store(store) as s:
        return sorted((r.run_key, r.score, r.errored) for r in s.scores() if r.scorer == "judge:scripted:J")


def test_score_rejudges_faults_until_none_remain_and_rescores_on_purpose(tmp_path, monkeypatch, capsys):
    state = {"down": True, "passed": True}
    _scripted_judges(monkeypatch, state)
    ds, store = runs_only_store(tmp_path)
    args = ["score", str(store), "--dataset", str(ds), "--judges", "scripted:J", "--quiet"]
    assert main(args) == 1  # the judge's server is down: not a result
    err = capsys.readouterr().err
    assert "have judge calls that failed" in err
    faulted = _judge_scores(store)
    assert faulted and all(score is None and errored for _, score, errored in faulted)
    assert main(args) == 1  # still down: still owed, and said again
    capsys.readouterr()
    state["down"] = False
    assert main(args) == 0  # back up: the same command judges them
    judged = _judge_scores(store)
    assert [k for k, _, _ in judged] == [k for k, _, _ in faulted]  # the same records, replaced
    assert all(score == 1.0 and not errored for _, score, errored in judged)
    assert main(args) == 0 and "0 new score records" in capsys.readouterr().out  # nothing left
    # --rescore judges again on purpose (a new prompt, a fixed server) and replaces
    state["passed"] = False
    assert main(args + ["--rescore"]) == 0
    assert "recomputed score records" in capsys.readouterr().out
    assert all(score == 0.0 for _, score, _ in _judge_scores(store))


def test_one_judge_default_for_run_score_and_demo(tmp_path, monkeypatch, capsys):
    """`iba run`, `iba score` and `iba demo` judge by the same rule unless told otherwise: the model
    that acted judges (`iba score` took the strongest installed model before), said by one help text."""
    import argparse

    from iba.cli import COMMANDS
    import importlib

    defaults, helps = set(), set()
    for name in ("run", "score", "demo"):
        parser = argparse.ArgumentParser()
        importlib.import_module(COMMANDS[name][0]).add_arguments(parser)
        action = next(a for a in parser._actions if a.dest == "judges")
        defaults.add(action.default)
        helps.add(action.help.split("; here")[0])
    assert defaults == {"same"} and len(helps) == 1
    # and it means what it says: the stored runs (model "m") are judged by "m"
    state = {"down": False, "passed": True}
    _scripted_judges(monkeypatch, state)
    ds, store = runs_only_store(tmp_path)
    assert main(["score", str(store), "--dataset", str(ds), "--quiet"]) == 0
    assert "judges: m (--judges same)" in capsys.readouterr().err
    with Store(store) as s:
        assert {r.scorer for r in s.scores() if r.scorer.startswith("judge:")} == {"judge:m"}


def test_score_bad_input_is_a_one_line_error(tmp_path, capsys):
    import pytest

    ds, store = runs_only_store(tmp_path)
    folder = tmp_path / "a-folder"
    folder.mkdir()
    assert main(["score", str(folder), "--dataset", str(ds), "--judges", "none"]) == 2  # was a StoreError traceback
    assert "is a folder, not a result store" in capsys.readouterr().err
    empty = tmp_path / "empty.sqlite"
    Store(empty).close()
    assert main(["score", str(empty), "--dataset", str(ds), "--judges", "none"]) == 2
    assert "nothing to score" in capsys.readouterr().err
    assert main(["score", str(store), "--dataset", str(ds), "--judges", "none", "--run", "nope"]) == 2
    assert "no run named nope" in capsys.readouterr().err
    for flag in ("--judge-repeats", "--concurrency"):
        with pytest.raises(SystemExit) as e:
            main(["score", str(store), "--dataset", str(ds), flag, "0"])
        assert e.value.code == 2 and f"argument {flag}: must be >= 1, got 0" in capsys.readouterr().err
