"""score_record: scorer choice by record kind, store resume, re-scoring with new judges, errors."""

from __future__ import annotations

import pytest

from iba.eval.scoring import score_record
from iba.run.store import Store
from iba.types import (Action, AnswerKey, ApiParam, ApiTemplate, Checkpoint, QAProbe, RunRecord, Slot, TraceStep,
                       VerifierRef)
from tests.fakes import ScriptedBackend

KEY = AnswerKey(
    instance_id="inst-1",
    checkpoints=[
        Checkpoint(id="c-table", dimension="api", dimension_name="API explanation", value="table",
                   expected="API parameters are given in a table.", kind="static", evidence=["t1"],
                   verifier=VerifierRef(id="has_table")),
        Checkpoint(id="c-depth", dimension="depth", dimension_name="Technical depth", value="simple",
                   expected="Explanations are simplified.", kind="static", evidence=["t2"]),
    ],
    qa=[QAProbe(id="q1", target="c-table", question="How should APIs be explained?",
                options=["In a table", "In prose"], answer=0)],
)
API_KEY = AnswerKey(
    instance_id="inst-2",
    slots=[Slot(id="s1", param="spice_level", dimension="spice", value="mild", accepted=["mild"], evidence=[])],
)
API = ApiTemplate(name="order_food", params=[ApiParam(name="spice_level", enum=["mild", "hot"], slot=True)])


def record(instance_id="inst-1", action=None, status="ok", error=None, key="rk1") -> RunRecord:
    return RunRecord(key=key, run="r", dataset="ds@1", instance_id=instance_id, user_id="u1", domain="writing",
                     scenario="technical_documentation", agent="rag", model="m", status=status, action=action,
                     error=error, started_at="2025-01-01T00:00:00", iba_version="0.1.0")


GEN = Action(kind="generate", text="| param | type |\n|---|---|\n| id | int |",
             trace=[TraceStep(step="secret-reasoning", outputs="THE AGENT'S PRIVATE TRACE")])


def judge(model_id, passed=True):
    return ScriptedBackend(lambda m, k: {"passed": passed, "rationale": "r"}, model_id=model_id)


async def test_generate_record_judges_and_verifiers_then_resume(tmp_path):
    store = Store(tmp_path / "s.sqlite")
    a = judge("A")
    recs = await score_record(record(action=GEN), KEY, judges=[a], judge_repeats=2, store=store)
    assert sorted((r.scorer, r.repeat) for r in recs) == [("judge:A", 0), ("judge:A", 1), ("verifiers", 0)]
    ver = next(r for r in recs if r.scorer == "verifiers")
    assert [(v.target, v.judge, v.passed) for v in ver.verdicts] == [("c-table", "verifier:has_table", True)]
    assert len(a.calls) == 4  # 2 checkpoints x 2 repeats
    # the judge never sees the agent's trace
    assert all("PRIVATE TRACE" not in m["content"] for msgs, _ in a.calls for m in msgs)
    # again: nothing to do
    assert await score_record(record(action=GEN), KEY, judges=[a], judge_repeats=2, store=store) == []
    assert len(a.calls) == 4
    # a new judge and a third repeat: only the missing pairs run
    b = judge("B", passed=False)
    recs = await score_record(record(action=GEN), KEY, judges=[a, b], judge_repeats=3, store=store)
    assert sorted((r.scorer, r.repeat) for r in recs) == [("judge:A", 2), ("judge:B", 0), ("judge:B", 1), ("judge:B", 2)]
    assert {r.score for r in recs if r.scorer == "judge:B"} == {0.0}
    assert len(list(store.scores())) == 7
    store.close()


async def test_call_api_record_uses_slots():
    rec = record("inst-2", Action(kind="call_api", api_name="order_food", params={"spice_level": "Mild"}), key="rk2")
    out = await score_record(rec, API_KEY, judges=[judge("A")], api_template=API)
    assert [(r.scorer, r.score, r.invalid_action) for r in out] == [("slots", 1.0, False)]
    bad = record("inst-2", Action(kind="call_api", api_name="order_food", params={"spice_level": "x"}), key="rk3")
    out = await score_record(bad, API_KEY, judges=[], api_template=API)
    assert out[0].score == 0.0 and out[0].invalid_action


async def test_qa_record():
    rec = record("inst-1::qa::q1", Action(kind="generate", text="Answer: A"), key="rq")
    out = await score_record(rec, KEY, judges=[judge("A")])
    assert [(r.scorer, r.score) for r in out] == [("qa", 1.0)]


async def test_errored_records_are_unscored_not_zero(tmp_path):
    err = record(status="errored", error="TimeoutError: too slow\ntraceback", key="rk-err")
    out = await score_record(err, KEY, judges=[judge("A")], judge_repeats=1)
    assert sorted(r.scorer for r in out) == ["judge:A", "verifiers"]
    assert all(r.score is None and all(v.passed is None for v in r.verdicts) for r in out)
    assert "TimeoutError: too slow" in out[0].verdicts[0].rationale
    out = await score_record(record("inst-2", status="errored", key="e2"), API_KEY, judges=[], api_template=API)
    assert out[0].scorer == "slots" and out[0].score is None
    out = await score_record(record("inst-1::qa::q1", status="errored", key="e3"), KEY, judges=[])
    assert out[0].scorer == "qa" and out[0].score is None


async def test_call_api_action_on_generate_task_scores_zero():
    rec = record(action=Action(kind="call_api", params={"x": 1}), key="rk4")
    out = await score_record(rec, KEY, judges=[judge("A")])
    # an invalid action fails every scorer, the deterministic verifiers included
    assert sorted((r.scorer, r.score, r.invalid_action) for r in out) == [("judge:A", 0.0, True), ("verifiers", 0.0, True)]


async def test_unparseable_judge_makes_the_instance_unscored_not_zero():
    bad = ScriptedBackend(lambda m, k: "not json", model_id="bad")
    out = await score_record(record(action=GEN, key="rk5"), KEY, judges=[bad])
    j = next(r for r in out if r.scorer == "judge:bad")
    assert j.score is None and [v.passed for v in j.verdicts] == [None, None]
    assert j.usage.llm_calls == 4  # two checkpoints, each tried twice
