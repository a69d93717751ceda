import asyncio
import json

import pytest

from iba import registry
from iba.agents.base import Agent, AgentEnv
from iba.dataset import Dataset
from iba.llm.base import LLMError
from iba.run.runner import RunConfig, run_dataset, run_one
from iba.run.store import Store
from iba.types import Action, TaskView
from tests.fakes import ScriptedBackend
from tests.run.helpers import SECRET_EXPECTED, tiny_dataset

SEEN: list[str] = []


class SpyAgent(Agent):
    """Records everything it is handed; answers trivially."""

    name = "spy"

    async def act(self, task, history):
        SEEN.append(json.dumps({"task": task.model_dump(), "history": [t.model_dump() for t in history],
                                "env": sorted(vars(self.env)), "scenarios": list(self.env.scenarios), "options": self.options}))
        if self.options.get("fail") == task.instance_id:
            raise RuntimeError("agent code exploded")  # the agent's own failure
        if self.options.get("fault") == task.instance_id:
            raise LLMError("local:x: request failed after 4 attempts: ConnectionError")  # infrastructure
        if self.options.get("wrong") == task.instance_id:
            return Action(kind="generate", text="not an API call")
        if task.action == "call_api":
            return Action(kind="call_api", api_name=task.api_name, params={"texture": "soft"})
        return Action(kind="generate", text="B")


@pytest.fixture(autouse=True)
def _spy():
    registry.register("agents", "spy", "tests.run.test_runner:SpyAgent")
    SEEN.clear()


def _run(ds, store, **kw):
    cfg = RunConfig(agents=kw.pop("agents", ["spy"]), score=False, progress=False, **kw)
    return asyncio.run(run_dataset(ds, ScriptedBackend([]), store, cfg))


def test_runs_resume_and_errors_are_records(tmp_path):
    ds = Dataset(tiny_dataset(tmp_path / "ds"))
    with Store(tmp_path / "s.sqlite") as store:
        s1 = _run(ds, store, agents=["spy?fault=i0"])
        assert (s1.planned, s1.ok, s1.errored) == (2, 1, 1)
        recs = {r.instance_id: r for r in store.runs()}
        assert recs["i0"].status == "errored" and recs["i0"].action is None
        assert "ConnectionError" in recs["i0"].error
        assert recs["i1"].action.params == {"texture": "soft"}
        s2 = _run(ds, store, agents=["spy?fault=i0"])  # rerun: everything already stored
        assert (s2.skipped, s2.ok, s2.errored) == (2, 0, 0)
        s3 = _run(ds, store, agents=["spy"], trials=2)  # a new agent spec and trials are new keys
        assert (s3.planned, s3.ok) == (4, 4)
        # --retry-errored: only the errored record runs again; the ok one is kept
        n = len(list(store.runs()))
        s4 = _run(ds, store, agents=["spy?fault=i0"], retry_errored=True)
        assert (s4.retried, s4.skipped, s4.ok, s4.errored) == (1, 1, 0, 1)
        assert len(list(store.runs())) == n
        s5 = _run(ds, store, agents=["spy"], retry_errored=True)  # nothing errored under this spec
        assert (s5.retried, s5.skipped) == (0, 2)


def test_agent_failures_are_failed_not_errored(tmp_path):
    """The agent's own crash or invalid action is 'failed' (scored 0), not retried as a fault."""
    ds = Dataset(tiny_dataset(tmp_path / "ds"))
    with Store(tmp_path / "s.sqlite") as store:
        s = _run(ds, store, agents=["spy?fail=i0&wrong=i1"])
        assert (s.ok, s.failed, s.errored) == (0, 2, 0)
        recs = {r.instance_id: r for r in store.runs()}
        assert recs["i0"].status == "failed" and "agent code exploded" in recs["i0"].error
        assert recs["i1"].status == "failed" and recs["i1"].action.kind == "generate"  # kept for the report
        again = _run(ds, store, agents=["spy?fail=i0&wrong=i1"], retry_errored=True)
        assert (again.retried, again.skipped) == (0, 2)  # a failure is a result, not retried


def _scored_run(ds, store, *, score=True, **kw):
    cfg = RunConfig(agents=kw.pop("agents", ["spy"]), score=score, progress=False, **kw)
    return asyncio.run(run_dataset(ds, ScriptedBackend([]), store, cfg))


def test_failed_records_score_zero_with_reason(tmp_path):
    ds = Dataset(tiny_dataset(tmp_path / "ds"))
    with Store(tmp_path / "s.sqlite") as store:
        _scored_run(ds, store, agents=["spy?fail=i0&wrong=i1"])
        runs = {r.key: r for r in store.runs()}
        scores = list(store.scores())
        assert scores and all(sc.score == 0.0 for sc in scores)
        assert {sc.failure for sc in scores} <= {"agent_failed", "invalid_action"}
        by_inst = {runs[sc.run_key].instance_id: sc for sc in scores}
        assert by_inst["i1"].failure == "invalid_action" and by_inst["i1"].invalid_action


def test_errored_records_stay_unscored(tmp_path):
    ds = Dataset(tiny_dataset(tmp_path / "ds"))
    with Store(tmp_path / "s.sqlite") as store:
        _scored_run(ds, store, agents=["spy?fault=i1"])
        runs = {r.key: r for r in store.runs()}
        bad = [sc for sc in store.scores() if runs[sc.run_key].instance_id == "i1"]
        assert bad and all(sc.score is None and sc.failure is None for sc in bad)


def test_rerun_scores_records_stored_unscored(tmp_path):
    """--no-score, then the same command with scoring: every stored record gets its scores."""
    ds = Dataset(tiny_dataset(tmp_path / "ds"))
    with Store(tmp_path / "s.sqlite") as store:
        _scored_run(ds, store, score=False, qa=True)
        assert list(store.scores()) == []
        s = _scored_run(ds, store, qa=True)
        # the call_api task and the QA probe; the generate task has no judge here (nothing to score)
        assert s.skipped == 3 and s.rescored == 2
        scorable = {r.key for r in store.runs() if r.instance_id != "i0" or r.probe}
        assert {sc.run_key for sc in store.scores()} == scorable


def test_rerun_after_kill_between_store_and_score(tmp_path):
    """The state a SIGKILL leaves between the two writes: a run stored, its scores not. (The kill
    itself is the same as --no-score for the store: the record is there, its scores are not.)"""
    ds = Dataset(tiny_dataset(tmp_path / "ds"))
    with Store(tmp_path / "s.sqlite") as store:
        _scored_run(ds, store)
        first = next(r for r in store.runs() if r.instance_id == "i1")
        store._db.execute("DELETE FROM scores WHERE run_key=?", (first.key,))
        store._db.commit()
        s = _scored_run(ds, store)
        assert s.rescored == 1 and any(sc.run_key == first.key for sc in store.scores())


def test_rerun_completes_a_partly_scored_record(tmp_path):
    """A kill between two judges' writes leaves one judge's score stored: the rerun adds the other's
    (seen for real in tests/run/test_processes.py, where a record kept its verifiers only)."""
    ds = Dataset(tiny_dataset(tmp_path / "ds"))
    judges = [ScriptedBackend(lambda m, k: {"passed": True, "rationale": "r"}, model_id=f"judge-{x}") for x in "ab"]
    with Store(tmp_path / "s.sqlite") as store:
        cfg = RunConfig(agents=["spy"], progress=False)
        asyncio.run(run_dataset(ds, ScriptedBackend([]), store, cfg, judges=judges))
        gen = next(r for r in store.runs() if r.instance_id == "i0")
        assert store.has_score(gen.key, "judge:judge-a") and store.has_score(gen.key, "judge:judge-b")
        store._db.execute("DELETE FROM scores WHERE run_key=? AND scorer='judge:judge-b'", (gen.key,))
        store._db.commit()
        s = asyncio.run(run_dataset(ds, ScriptedBackend([]), store, cfg, judges=judges))
        assert s.rescored == 1 and store.has_score(gen.key, "judge:judge-b")
        s = asyncio.run(run_dataset(ds, ScriptedBackend([]), store, cfg, judges=judges))
        assert s.rescored == 0  # nothing missing: nothing counted


def test_agent_never_sees_the_answer_key(tmp_path):
    ds = Dataset(tiny_dataset(tmp_path / "ds"))
    with Store(tmp_path / "s.sqlite") as store:
        _run(ds, store, qa=True)
    assert len(SEEN) == 3  # two tasks + one QA probe
    blob = "\n".join(SEEN)
    assert SECRET_EXPECTED not in blob
    for hidden in ("checkpoints", "slots", "evidence", "accepted", "answer", "i0-c0", "i1-s0"):
        assert hidden not in blob, hidden
    # the QA probe reaches the agent as a plain question with lettered options
    qa = [json.loads(s) for s in SEEN if '"probe":' in s]
    assert len(qa) == 1 and "Pseudocode" in qa[0]["task"]["query"] and qa[0]["task"]["probe"] == "q0"


def test_unknown_agent_lists_choices(tmp_path):
    ds = Dataset(tiny_dataset(tmp_path / "ds"))
    with Store(tmp_path / "s.sqlite") as store, pytest.raises(KeyError, match="choose from:.*rag"):
        _run(ds, store, agents=["nope"])


def test_a_failed_record_keeps_the_steps_that_ran():
    from iba.agents.trace import Trace
    from iba.llm.structured import StructuredOutputError

    class Halfway(Agent):
        name = "halfway"

        async def act(self, task, history):
            trace = Trace()
            with trace.step("similarity_retrieve", {"query": task.query}) as st:
                st.outputs = [{"turn_ids": ["u0-s0-t0"]}]
            with trace.step("extract_preferences"):
                raise StructuredOutputError("the reply never validated")

    task = TaskView(instance_id="i0", user_id="u0", domain="d", scenario="s", scenario_name="S", query="q",
                    action="generate", now="2025-02-01T09:00:00")
    rec = asyncio.run(run_one(Halfway(AgentEnv(backend=ScriptedBackend([]))), "halfway", task, [], dataset="d",
                              model="m", trial=0, cfg=RunConfig(agents=["halfway"], progress=False)))
    assert rec.status == "failed" and rec.action is None
    assert [s.step for s in rec.partial_trace] == ["similarity_retrieve", "extract_preferences"]
    assert rec.partial_trace[1].error and rec.partial_trace[0].outputs == [{"turn_ids": ["u0-s0-t0"]}]


def test_agents_get_the_public_scenario_names(tmp_path):
    ds = Dataset(tiny_dataset(tmp_path / "ds"))
    with Store(tmp_path / "s.sqlite") as store:
        _run(ds, store)
    seen = [json.loads(x)["scenarios"] for x in SEEN]
    assert seen and all(s == sorted({t.scenario_name for t in ds.instances}) for s in seen)


class OrderAgent(Agent):
    """Logs when each action starts and ends (to check when the held-back key is read)."""

    name = "order"
    log: list[tuple[str, str]] = []

    async def act(self, task, history):
        OrderAgent.log.append(("start", task.instance_id))
        await asyncio.sleep(0.05)
        OrderAgent.log.append(("end", task.instance_id))
        if task.action == "call_api":
            return Action(kind="call_api", api_name=task.api_name, params={"texture": "soft"})
        return Action(kind="generate", text="B")


@pytest.mark.parametrize("concurrency", [1, 2])
def test_a_held_back_key_is_read_only_after_the_items_agents_finished(tmp_path, monkeypatch, concurrency):
    registry.register("agents", "order", "tests.run.test_runner:OrderAgent")
    OrderAgent.log = []
    root = tiny_dataset(tmp_path / "ds")
    held = tmp_path / "evaluator" / "answer_key.jsonl"
    held.parent.mkdir()
    (root / "answer_key.jsonl").rename(held)
    ds = Dataset(root, answer_key=held)
    real = Dataset.answer_key_for

    def logged(self, instance_id):
        OrderAgent.log.append(("key", instance_id))
        return real(self, instance_id)

    monkeypatch.setattr(Dataset, "answer_key_for", logged)
    monkeypatch.setattr(Dataset, "answer_keys", lambda self: pytest.fail("the whole key was loaded"))
    cfg = RunConfig(agents=["order", "order?x=1"], concurrency=concurrency, progress=False)
    with Store(tmp_path / "s.sqlite") as store:
        s = asyncio.run(run_dataset(ds, ScriptedBackend([]), store, cfg, judges=[]))
        assert s.ok == 4
        scored = {r.run_key for r in store.scores()}
    log = OrderAgent.log
    for i, (event, iid) in enumerate(log):
        if event == "key":  # both agents' runs of that item have ended before its key is read
            assert log[:i].count(("end", iid)) == 2
    assert ("key", "i1") in log and len(scored) == 2  # the call_api runs got slot scores (no judges for i0)
    assert ds.hidden_paths[-3:] == tuple(str((held.parent / n).resolve()) for n in
                                         ("answer_key.jsonl", "distractors.jsonl", "persona_states.jsonl"))


def test_a_stored_record_waits_for_the_held_back_key_until_the_items_new_runs_end(tmp_path, monkeypatch):
    """Resume: records stored unscored (--no-score, a kill) are scored at plan time, except with a
    held-back key while the same item still has runs to do in this plan: then after them."""
    registry.register("agents", "order", "tests.run.test_runner:OrderAgent")
    root = tiny_dataset(tmp_path / "ds")
    held = tmp_path / "evaluator" / "answer_key.jsonl"
    held.parent.mkdir()
    (root / "answer_key.jsonl").rename(held)
    real = Dataset.answer_key_for
    monkeypatch.setattr(Dataset, "answer_key_for",
                        lambda self, iid: OrderAgent.log.append(("key", iid)) or real(self, iid))
    with Store(tmp_path / "s.sqlite") as store:
        OrderAgent.log = []
        asyncio.run(run_dataset(Dataset(root, answer_key=held), ScriptedBackend([]), store,
                                RunConfig(agents=["order"], score=False, progress=False)))
        assert not any(e == "key" for e, _ in OrderAgent.log) and list(store.scores()) == []
        OrderAgent.log = []
        asyncio.run(run_dataset(Dataset(root, answer_key=held), ScriptedBackend([]), store,
                                RunConfig(agents=["order", "order?x=1"], progress=False)))
        log = OrderAgent.log
        reads = [(i, iid) for i, (e, iid) in enumerate(log) if e == "key"]
        assert {iid for _, iid in reads} == {"i0", "i1"}
        assert all(("end", iid) in log[:i] for i, iid in reads)  # each item's new run came first
        assert len([s for s in store.scores() if s.scorer == "slots"]) == 2  # and both records were scored
