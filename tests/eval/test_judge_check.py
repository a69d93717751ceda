"""The judge calibration check: deterministic cases with known verdicts, through the real judge call."""

from __future__ import annotations

import json

import pytest

from iba import prompts
from iba.eval.judge import TEMPLATE
from iba.eval.judge_check import build_cases, case_set_hash, judge_check
from iba.run.store import Store
from tests.fakes import ScriptedBackend


def _always_pass(messages, kwargs):
    return {"passed": True, "rationale": "fine"}


def _response_and_requirement(messages):
    user = messages[-1]["content"]
    req = user.split("Requirement (", 1)[1].split("):", 1)[1].split("\n", 1)[0].strip()
    resp = user.split("<<<", 1)[1].split(">>>", 1)[0]
    return resp, req


def _perfect(messages, kwargs):
    resp, req = _response_and_requirement(messages)
    clause = req.rstrip(".")
    clause = clause[:1].lower() + clause[1:]
    return {"passed": clause in resp, "rationale": "checked"}


def test_cases_are_deterministic_and_balanced():
    a, b = build_cases(24, seed=7), build_cases(24, seed=7)
    assert [c.model_dump() for c in a] == [c.model_dump() for c in b]
    assert case_set_hash(a) == case_set_hash(b) != case_set_hash(build_cases(24, seed=8))
    assert len(a) == 24 and sum(c.expected for c in a) == 12
    assert {c.expected for c in a} == {True, False}


def test_dynamic_violation_is_written_to_the_superseded_value():
    cases = build_cases(24, seed=1)
    dyn = [c for c in cases if c.checkpoint.kind == "dynamic"]
    assert dyn
    for c in dyn:
        assert c.checkpoint.superseded
        old = c.checkpoint.superseded.rstrip(".")
        new = c.checkpoint.expected.rstrip(".")
        text = c.response
        if c.expected:
            assert (new[:1].lower() + new[1:]) in text and (old[:1].lower() + old[1:]) not in text
        else:
            assert (old[:1].lower() + old[1:]) in text


async def test_always_pass_judge_passes_every_violation_and_is_warned(tmp_path):
    from iba.report.judges import judge_notes

    cases = build_cases(12, seed=3)
    backend = ScriptedBackend(_always_pass, model_id="scripted:yes")
    r = await judge_check(backend, cases)
    assert r.n == 12 and r.unscored == 0
    assert r.violation_pass_rate == 1.0 and r.compliant_pass_rate == 1.0 and r.accuracy == 0.5
    assert r.prompt_hash == prompts.template_hash(TEMPLATE) and r.case_set_hash == case_set_hash(cases)
    assert r.judge == "scripted:yes"
    store = tmp_path / "s.sqlite"
    with Store(store) as s:
        assert s.put_judge_check(r) is True
        assert s.put_judge_check(r) is False  # append-only: the same check is stored once
        assert [x.judge for x in s.judge_checks()] == ["scripted:yes"]
    notes = judge_notes(store, ["judge:scripted:yes"], ["scripted:yes"])
    assert any(line.startswith("WARNING") and "passes known violations" in line for line in notes)
    assert any("self-judging" in line for line in notes)


async def test_perfect_judge_gets_accuracy_one_through_the_panel_prompt():
    cases = build_cases(24, seed=5)
    backend = ScriptedBackend(_perfect, model_id="scripted:perfect")
    r = await judge_check(backend, cases)
    assert r.accuracy == 1.0 and r.violation_pass_rate == 0.0 and r.compliant_pass_rate == 1.0
    # the prompt is the scoring panel's judge_checkpoint prompt, with the superseded value for dynamic cases
    assert all("Requirement (" in m[-1]["content"] for m, _ in backend.calls)
    assert any("earlier preference" in m[-1]["content"] for m, _ in backend.calls)


async def test_unparseable_replies_are_unscored_not_counted():
    cases = build_cases(4, seed=2)
    r = await judge_check(ScriptedBackend(lambda m, k: "not json", model_id="scripted:bad"), cases)
    assert r.unscored == 4 and r.accuracy is None and r.violation_pass_rate is None


def test_cases_from_a_dataset(tmp_path):
    import subprocess
    import sys

    out = tmp_path / "demo"
    subprocess.run([sys.executable, "-m", "iba.cli", "build", "--preset", "demo", "--out", str(out)],
                   check=True, capture_output=True)
    cases = build_cases(8, seed=1, dataset=out)
    assert len(cases) == 8 and {c.expected for c in cases} == {True, False}
    assert all(c.checkpoint.evidence is not None for c in cases)


def test_cli_json_with_a_scripted_judge(tmp_path, monkeypatch, capsys):
    from iba import cli
    import iba.commands.model_options as run_cmd

    monkeypatch.setattr(run_cmd, "backend_from_args", lambda model, args, judge=False: ScriptedBackend(_always_pass, model_id=model))
    rc = cli.main(["judge-check", "scripted:x", "--n", "6", "--json", "--store", str(tmp_path / "s.sqlite")])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["judge"] == "scripted:x" and out["n"] == 6 and out["violation_pass_rate"] == 1.0
    with Store(tmp_path / "s.sqlite") as s:
        assert len(s.judge_checks("scripted:x")) == 1


@pytest.mark.slow
async def test_real_small_judge_fails_at_least_one_known_violation(local_backend):
    cases = build_cases(8, seed=42)
    r = await judge_check(local_backend, cases, concurrency=1)
    assert r.n == 8
    scored_violations = [o for o in r.outcomes if not o.expected and o.passed is not None]
    assert scored_violations, "the judge scored none of the known violations"
    assert any(o.passed is False for o in scored_violations), f"passed every known violation: {r.model_dump_json()}"


@pytest.mark.slow
async def test_real_1p5b_judge_fails_known_violations(coder_1p5b_backend):
    # the default judge of `iba score` must be able to say no: some known violations fail
    r = await judge_check(coder_1p5b_backend, build_cases(8, seed=42), concurrency=1)
    scored_violations = [o for o in r.outcomes if not o.expected and o.passed is not None]
    assert scored_violations, "the judge scored none of the known violations"
    assert any(o.passed is False for o in scored_violations), f"passed every known violation: {r.model_dump_json()}"


@pytest.mark.parametrize("reply, message", [
    (lambda m, k: __import__("iba.llm.base", fromlist=["x"]).LLMError("x: request failed (connection)"),
     "6 of 6 judge calls failed; nothing saved"),
    (lambda m, k: "no json here", "the judge scored none of the 6 cases; nothing saved"),
])
def test_cli_with_no_scored_case_fails_and_saves_nothing(tmp_path, monkeypatch, capsys, reply, message):
    from iba import cli
    import iba.commands.model_options as run_cmd

    monkeypatch.setattr(run_cmd, "backend_from_args", lambda model, args, judge=False: ScriptedBackend(reply, model_id=model))
    rc = cli.main(["judge-check", "scripted:x", "--n", "6", "--quiet", "--store", str(tmp_path / "s.sqlite")])
    assert rc == 1
    assert message in capsys.readouterr().err
    with Store(tmp_path / "s.sqlite") as s:
        assert s.judge_checks() == []


def test_cli_with_some_failed_calls_saves_nothing(tmp_path, monkeypatch, capsys):
    from iba import cli
    import iba.commands.model_options as run_cmd
    from iba.llm.base import LLMError

    calls = []

    def reply(m, k):  # the first case's call fails, and so does its one retry; the others are judged
        calls.append(1)
        return LLMError("x: 503") if len(calls) <= 2 else {"passed": True, "rationale": "r"}

    monkeypatch.setattr(run_cmd, "backend_from_args", lambda model, args, judge=False: ScriptedBackend(reply, model_id=model))
    rc = cli.main(["judge-check", "scripted:x", "--n", "6", "--quiet", "--concurrency", "1", "--store", str(tmp_path / "s.sqlite")])
    out = capsys.readouterr()
    assert rc == 1 and "1 of 6 judge calls failed; nothing saved" in out.err and "(1 judge calls failed)" in out.out
    with Store(tmp_path / "s.sqlite") as s:
        assert s.judge_checks() == []
