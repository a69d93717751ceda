"""score_record: scorer choice by record kind, store resume, re-scoring with new judges, errors."""

from __future__ import annotations


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


def record(instance_id="inst-1", action=None, status="ok", error=None, key="rk1", probe=None) -> RunRecord:
    return RunRecord(key=key, run="r", dataset="ds@1", instance_id=instance_id, probe=probe, user_id="u1", domain="writing",
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
    rec = record("inst-1", Action(kind="generate", text="Answer: A"), key="rq", probe="q1")
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
    out = await score_record(record("inst-1", status="errored", key="e3", probe="q1"), KEY, judges=[])
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


# ---------------------------------------------------------------- judge faults (infrastructure)


def flaky(model_id: str, down: set[str]):
    """A judge whose calls fail (LLMError, as after the client's retries) while the requirement
    text of a checkpoint in `down` is in the prompt; `down` may change between calls."""
    from iba.llm.base import LLMError

    def reply(messages, kwargs):
        text = " ".join(m["content"] for m in messages)
        if any(d in text for d in down):
            return LLMError(f"{model_id}: request failed after 4 attempts (server_error, HTTP 503)")
        return {"passed": True, "rationale": "ok"}

    return ScriptedBackend(reply, model_id=model_id)


ALL = {c.expected for c in KEY.checkpoints}


async def test_a_judge_outage_is_errored_not_a_verdict_and_is_judged_again(tmp_path):
    down = set(ALL)
    j = flaky("J", down)
    with Store(tmp_path / "s.sqlite") as store:
        [rec] = [r for r in await score_record(record(action=GEN), KEY, judges=[j], store=store) if r.scorer == "judge:J"]
        assert rec.errored and rec.score is None
        assert [(v.passed, v.errored) for v in rec.verdicts] == [(None, True), (None, True)]
        assert "judge call failed again" in rec.verdicts[0].rationale
        assert store.score_errored("rk1", "judge:J") is True and store.count_errored(["rk1"]) == (0, 1)
        # the same outage on a rerun: asked again (not skipped as "already stored"), still errored
        n = len(j.calls)
        await score_record(record(action=GEN), KEY, judges=[j], store=store)
        assert len(j.calls) > n and store.count_errored(["rk1"]) == (0, 1)
        # the server is back: judged, stored in place of the errored record, and final
        down.clear()
        [rec] = [r for r in await score_record(record(action=GEN), KEY, judges=[j], store=store) if r.scorer == "judge:J"]
        assert not rec.errored and rec.score == 1.0
        assert [s.score for s in store.scores() if s.scorer == "judge:J"] == [1.0]  # one row, replaced
        assert store.count_errored(["rk1"]) == (0, 0)
        n = len(j.calls)
        assert await score_record(record(action=GEN), KEY, judges=[j], store=store) == []
        assert len(j.calls) == n


async def test_only_the_failed_verdicts_are_judged_again(tmp_path):
    depth = KEY.checkpoints[1].expected
    down = {depth}
    j = flaky("J", down)
    with Store(tmp_path / "s.sqlite") as store:
        [rec] = [r for r in await score_record(record(action=GEN), KEY, judges=[j], store=store) if r.scorer == "judge:J"]
        assert [(v.target, v.passed, v.errored) for v in rec.verdicts] == [("c-table", True, False), ("c-depth", None, True)]
        assert rec.score is None  # a pass with a hole has no score until the hole is judged
        down.clear()
        n = len(j.calls)
        [rec] = await score_record(record(action=GEN), KEY, judges=[j], store=store)
        assert len(j.calls) == n + 1 and depth in " ".join(m["content"] for m in j.calls[-1][0])
        assert [(v.target, v.passed, v.errored) for v in rec.verdicts] == [("c-table", True, False), ("c-depth", True, False)]
        assert rec.score == 1.0


async def test_an_unparseable_reply_stays_unscored_and_is_not_asked_again(tmp_path):
    bad = ScriptedBackend(lambda m, k: "not json", model_id="bad")
    with Store(tmp_path / "s.sqlite") as store:
        [rec] = [r for r in await score_record(record(action=GEN), KEY, judges=[bad], store=store) if r.scorer == "judge:bad"]
        assert rec.score is None and not rec.errored and not any(v.errored for v in rec.verdicts)
        n = len(bad.calls)
        assert await score_record(record(action=GEN), KEY, judges=[bad], store=store) == []
        assert len(bad.calls) == n and store.count_errored(["rk1"]) == (0, 0)


async def test_rescore_replaces_what_is_stored(tmp_path):
    with Store(tmp_path / "s.sqlite") as store:
        await score_record(record(action=GEN), KEY, judges=[judge("A", passed=True)], store=store)
        assert [s.score for s in store.scores() if s.scorer == "judge:A"] == [1.0]
        again = judge("A", passed=False)  # e.g. a new judge prompt
        assert await score_record(record(action=GEN), KEY, judges=[again], store=store) == []  # not without asking
        recs = await score_record(record(action=GEN), KEY, judges=[again], store=store, rescore=True)
        assert {r.scorer for r in recs} == {"judge:A", "verifiers"}
        assert [s.score for s in store.scores() if s.scorer == "judge:A"] == [0.0]


def test_api_template_for_one_rule_for_run_and_score():
    from iba.eval.scoring import api_template_for
    from iba.taxonomy import scenario_api

    slots_key = API_KEY.model_copy(update={"instance_id": "inst-1"})
    food = record().model_copy(update={"scenario": "food_ordering"})
    assert api_template_for(food, slots_key) == scenario_api("food_ordering") is not None
    assert api_template_for(food.model_copy(update={"probe": "q1"}), slots_key) is None  # a QA probe: no slots
    assert api_template_for(record(), KEY) is None  # a generate task: its key has no slots
