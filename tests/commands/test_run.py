"""`iba run`'s exit status and the held-back answer key, as a user meets them.

Exit 1 whenever the selection still holds errored records or errored judge calls, however often the
same command is rerun; exit 2 for an empty selection; `--answer-key` reads a key kept outside the
dataset folder (and `iba score` / `iba report` accept it too).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from iba.cli import main
from iba.run.store import Store
from tests.fakes import ScriptedBackend
from tests.run.helpers import tiny_dataset

ROOT = Path(__file__).resolve().parents[2]
HONEST = f"external?cmd=python {ROOT / 'examples' / 'external_agent.py'}"
OFFLINE = ["--model", "openai:none", "--base-url", "http://127.0.0.1:9/v1", "--quiet"]


@pytest.fixture
def root(tmp_path) -> Path:
    return tiny_dataset(tmp_path / "ds")


def run(root: Path, *extra: str) -> int:
    return main(["run", str(root), *OFFLINE, "--store", str(root.parent / "s.sqlite"), "--cache-dir",
                 str(root.parent / "cache"), *map(str, extra)])


def test_a_rerun_does_not_hide_errored_records(root, capsys):
    # an agent that cannot be started: an infrastructure fault, so both records are errored
    spec = "external?sandbox=none&cmd=/nonexistent/agent"
    assert run(root, "--agent", spec, "--judges", "none") == 1
    err = capsys.readouterr().err
    assert "2 record(s) of this selection are errored" in err and "2 stored by this run, 0 before it" in err
    # the same command again: "2 already stored", and still not a success
    assert run(root, "--agent", spec, "--judges", "none") == 1
    captured = capsys.readouterr()
    assert "2 already stored" in captured.out
    assert "2 record(s) of this selection are errored" in captured.err and "0 stored by this run, 2 before it" in captured.err
    # a narrower selection owes only its own
    assert run(root, "--agent", spec, "--judges", "none", "--limit", "1") == 1
    assert "1 record(s) of this selection are errored" in capsys.readouterr().err
    # another agent's clean run on the same store owes nothing
    assert run(root, "--agent", HONEST, "--judges", "none") == 0


def _judge(monkeypatch, state: dict) -> None:
    """Every model string resolves to a scripted backend; the judge J is down while state["down"]."""
    import iba.commands.run as run_cmd
    from iba.llm.base import LLMError

    def reply(messages, kwargs):
        if state["down"]:
            return LLMError("scripted:J: request failed after 4 attempts (server_error, HTTP 503)")
        return {"passed": True, "rationale": "ok"}

    monkeypatch.setattr(run_cmd, "backend_from_args", lambda model, args, judge=False: ScriptedBackend(reply, model_id=model))


def test_a_judge_outage_is_judged_again_by_a_rerun(root, monkeypatch, capsys):
    state = {"down": True}
    _judge(monkeypatch, state)
    args = ["--agent", HONEST, "--judges", "scripted:J"]
    assert run(root, *args) == 1
    assert "1 score record(s) of this selection have judge calls that failed" in capsys.readouterr().err
    with Store(root.parent / "s.sqlite") as s:
        [faulted] = [r for r in s.scores() if r.scorer == "judge:scripted:J"]
    assert faulted.errored and faulted.score is None and faulted.verdicts[0].passed is None
    assert run(root, *args) == 1  # still down: a rerun says so again (it used to report "0 new score records")
    capsys.readouterr()
    state["down"] = False
    assert run(root, *args) == 0  # the server is back: the same command judges it
    out = capsys.readouterr().out
    assert "1 stored records scored" in out
    with Store(root.parent / "s.sqlite") as s:
        [judged] = [r for r in s.scores() if r.scorer == "judge:scripted:J"]
    assert not judged.errored and judged.score == 1.0


def test_an_empty_selection_is_an_error(root, capsys):
    assert run(root, "--agent", HONEST, "--judges", "none", "--domain", "writing", "--scenario", "food_ordering") == 2
    assert "nothing to run: no instance matches --domain, --scenario and --user together" in capsys.readouterr().err
    assert not (root.parent / "s.sqlite").exists()


def test_an_empty_instances_file_is_an_error(root, capsys):
    (root / "instances.jsonl").write_text("")
    assert run(root, "--agent", HONEST, "--judges", "none") == 2
    err = capsys.readouterr().err
    assert "nothing to run:" in err and "instances.jsonl has no instances" in err
    assert not (root.parent / "s.sqlite").exists()


# ---------------------------------------------------------------- a held-back answer key


def _hold_back(root: Path) -> Path:
    held = root.parent / "evaluator"
    held.mkdir()
    (root / "answer_key.jsonl").rename(held / "answer_key.jsonl")
    return held / "answer_key.jsonl"


def test_a_held_back_key_scores_a_run(root, capsys):
    key = _hold_back(root)
    # without it the run cannot score: the key is not in the folder
    assert run(root, "--agent", HONEST, "--judges", "none") == 2
    err = capsys.readouterr().err  # it says what to do, not only which cache path lacks the file
    assert "answer_key.jsonl: no answer key: tiny is a public release whose key is held back" in err
    assert "--answer-key PATH" in err
    assert run(root, "--agent", HONEST, "--judges", "none", "--answer-key", key) == 0
    out = capsys.readouterr().out
    assert f"--answer-key {key}" in out  # the report command it suggests
    with Store(root.parent / "s.sqlite") as s:
        assert [r.scorer for r in s.scores()] == ["slots"]
    # iba score and iba report take it too
    assert main(["score", str(root.parent / "s.sqlite"), "--dataset", str(root), "--answer-key", str(key),
                 "--judges", "none", "--quiet"]) == 0
    assert main(["report", str(root.parent / "s.sqlite"), "--dataset", str(root), "--answer-key", str(key),
                 "--out", str(root.parent / "report")]) == 0
    assert main(["score", str(root.parent / "s.sqlite"), "--dataset", str(root), "--judges", "none"]) == 2


def test_qa_probes_with_a_held_back_key(root, capsys):
    """A public release can measure the knowledge-to-action gap: the tasks run first, then the
    probes (which are in the key), each item's key opened only once its task runs are stored."""
    key = _hold_back(root)
    assert run(root, "--agent", HONEST, "--judges", "none", "--answer-key", key, "--qa") == 0
    assert "now the QA probes (in the held-back key)" in capsys.readouterr().out
    with Store(root.parent / "s.sqlite") as s:
        ids = sorted((r.instance_id, r.probe or "") for r in s.runs())
        scorers = sorted(r.scorer for r in s.scores())
    assert ids == [("i0", ""), ("i0", "q0"), ("i1", "")] and scorers == ["qa", "slots"]


def test_the_run_ends_with_each_agents_overall_score(root, capsys):
    """The last lines of `iba run`: each agent on the same instances, with n, interval and counts;
    an agent with no scored instance yet is named and left out, the others still compared."""
    failing = "external?sandbox=none&cmd=/nonexistent/agent"  # errored: never scored
    assert run(root, "--agent", HONEST, "--agent", failing, "--judges", "none") == 1
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-3] == "overall, every row on the same 1 instance(s), x100 with a 95% bootstrap interval:"
    assert lines[-2].startswith(f"  {HONEST} (own model): 0.0 (n=1: no interval); 0 failed (scored 0), 0 errored")
    assert lines[-1] == (f"  {failing} (own model) [unsandboxed]: no scored instance yet, left out of the comparison "
                         "(0 failed (scored 0), 2 errored, 0 unscored of 2 run)")


def test_batch_needs_no_api_key(root, monkeypatch, capsys):
    """`--batch` calls no model: an openai: model needs no OPENAI_API_KEY there (`iba batch submit` does)."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    rc = main(["run", str(root), "--agent", "direct?max_tokens=8", "--model", "openai:gpt-4o-mini", "--judges", "none",
               "--store", str(root.parent / "s.sqlite"), "--batch", str(root.parent / "b"), "--quiet"])
    assert rc == 3, capsys.readouterr().err  # calls await their batch answers
    assert list((root.parent / "b" / "round-0001").glob("*.requests.jsonl"))


def test_held_back_key_options_are_checked(root, capsys):
    key = _hold_back(root)
    assert run(root, "--agent", HONEST, "--answer-key", root.parent / "missing.jsonl") == 2
    assert "argument --answer-key:" in capsys.readouterr().err
    # a key without this instance stops the run when its item is scored; the record is kept
    lines = key.read_text().splitlines()
    key.write_text("\n".join(x for x in lines if '"i1"' not in x) + "\n")
    assert run(root, "--agent", HONEST, "--judges", "none", "--answer-key", key) == 2
    assert "no answer key for instance 'i1'" in capsys.readouterr().err
    with Store(root.parent / "s.sqlite") as s:
        assert "i1" in {r.instance_id for r in s.runs()}


def test_the_context_window_reaches_the_backend():
    """--context-window: what direct (the full-context row) fills; a server model has no other way to say it."""
    import argparse

    from iba.commands.model_options import backend_from_args
    from iba.commands.run import add_arguments

    p = argparse.ArgumentParser()
    add_arguments(p)
    server = ["ds", "--model", "openai:m", "--base-url", "http://127.0.0.1:9/v1", "--no-cache"]
    assert backend_from_args("openai:m", p.parse_args(server + ["--context-window", "131072"])).context_window == 131072
    assert backend_from_args("openai:m", p.parse_args(server)).context_window == 8192
