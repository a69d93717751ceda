"""The oracle reference on the demo build: the runner hands it exactly the answer key's evidence
turns (every gold turn, nothing else, whole, in time order), from a key in the folder or a held-back
one; no other agent, whatever its name or class, is ever handed key-derived turns; null sees none."""

from __future__ import annotations

import asyncio
import json
import re
import shutil

import pytest

from iba import registry
from iba.agents.base import Agent, AgentEnv
from iba.agents.external import ExternalAgent
from iba.agents.references import GoldTurns, OracleAgent, OracleMisuse
from iba.dataset import Dataset
from iba.retrieval.chunking import turn_line
from iba.run.oracle import history_for
from iba.run.runner import RunConfig, make_agent, run_dataset, run_one
from iba.run.store import Store
from iba.types import Action
from tests.construct.conftest import demo_dir  # noqa: F401  (a demo build)
from tests.fakes import ScriptedBackend

HANDED: list[tuple[str, type, list[str]]] = []


class Recorder(Agent):
    """What a third-party agent would be handed: the class of its history and the turn ids."""

    name = "recorder"

    async def act(self, task, history):
        HANDED.append((task.instance_id, type(history), [t.id for t in history]))
        if task.action == "call_api":
            return Action(kind="call_api", api_name=task.api_name, params={})
        return Action(kind="generate", text="x")


class Sneaky(OracleAgent):
    """A subclass of the oracle: still not the oracle."""


def valid_params(schema: dict) -> dict:
    out = {}
    for name, p in schema["properties"].items():
        out[name] = p["enum"][0] if "enum" in p else 1 if p.get("type") == "integer" else "19:00"
    return out


def answering_backend() -> ScriptedBackend:
    def reply(messages, kwargs):
        m = re.search(r"JSON schema:\n(\{.*\})", messages[0]["content"], re.S)
        return valid_params(json.loads(m.group(1))) if m else "a text"
    return ScriptedBackend(reply)


def gold_ids(key) -> set[str]:
    """The key's evidence turns, read here from the key itself (not through iba.run.oracle)."""
    return {t for c in key.checkpoints for t in c.evidence} | {t for s in key.slots for t in s.evidence}


def _history_lines(prompt: str) -> list[str]:
    body = prompt.split("Conversation history", 1)[1].split("\nToday is", 1)[0]
    return [line for line in body.splitlines()[1:] if line.strip()]


def _run(ds: Dataset, store_path, agents, backend=None, score=False):
    cfg = RunConfig(agents=agents, score=score, progress=False, cache_dir=store_path.parent / "cache")
    backend = backend or answering_backend()
    with Store(store_path) as store:
        asyncio.run(run_dataset(ds, backend, store, cfg))
        return backend, {r.instance_id: r for r in store.runs()}


@pytest.mark.parametrize("held_back,score", [(False, False), (False, True), (True, True)])
def test_the_oracle_is_handed_exactly_the_keys_evidence_turns(demo_dir, tmp_path, held_back, score):
    """score: the keys the runner loaded to score; else (held back, or not scoring) read per item."""
    root = tmp_path / "demo"
    shutil.copytree(demo_dir, root)
    keys = Dataset(root).answer_keys()
    ds = Dataset(root)
    if held_back:  # the key kept outside the folder (`iba run --answer-key`): the runner opens it for the oracle
        shutil.move(root / "answer_key.jsonl", tmp_path / "key.jsonl")
        ds = Dataset(root, answer_key=tmp_path / "key.jsonl")
    backend, recs = _run(ds, tmp_path / "s.sqlite", ["oracle"], score=score)
    assert set(recs) == {t.instance_id for t in ds.instances}
    for task in ds.instances:
        rec = recs[task.instance_id]
        assert rec.status == "ok", rec.error
        gold = gold_ids(keys[task.instance_id])
        history = ds.history(task.user_id)
        shown = rec.action.trace[0].outputs["turn_ids"]
        assert set(shown) == gold and len(shown) == len(gold)  # every gold turn, nothing else
        order = [t.id for t in history if t.id in gold]
        assert shown == order  # in time order
        prompt = next(m[-1]["content"] for m, _ in backend.calls if task.query in m[-1]["content"])
        by_id = {t.id: t for t in history}
        assert _history_lines(prompt) == [turn_line(by_id[i]) for i in order]  # whole turns, as direct shows them
        assert rec.action.trace[0].outputs["dropped_turns"] == 0


def test_no_other_agent_is_handed_key_derived_turns(demo_dir, tmp_path):
    ds = Dataset(demo_dir)
    registry.register("agents", "recorder", "tests.run.test_oracle:Recorder")
    registry.register("agents", "sneaky", "tests.run.test_oracle:Sneaky")
    HANDED.clear()
    _, recs = _run(ds, tmp_path / "s.sqlite", ["recorder", "sneaky"])
    for iid, kind, ids in HANDED:
        task = next(t for t in ds.instances if t.instance_id == iid)
        assert kind is list and ids == [t.id for t in ds.history(task.user_id)]  # the whole history, as given
    sneaky = [r for r in recs.values() if r.agent == "sneaky"]
    assert sneaky and all(r.status == "failed" and "OracleMisuse" in r.error for r in sneaky)
    # an agent registered under the oracle's name is not the oracle either
    original = registry.resolve("agents", "oracle")
    try:
        registry.register("agents", "oracle", "tests.run.test_oracle:Recorder")
        HANDED.clear()
        _run(ds, tmp_path / "s2.sqlite", ["oracle"])
        assert HANDED and all(kind is list for _, kind, _ in HANDED)
    finally:
        registry.register("agents", "oracle", f"{original.__module__}:{original.__qualname__}")
    # an external agent: history_for hands it the very history object, never a GoldTurns
    task = ds.instances[0]
    history = ds.history(task.user_id)
    ext = ExternalAgent(AgentEnv(backend=ScriptedBackend([])), cmd="true")
    assert history_for(ext, ds, task, history) is history


def test_outside_the_runner_the_oracle_refuses(demo_dir):
    ds = Dataset(demo_dir)
    task = ds.instances[0]
    agent = make_agent("oracle", AgentEnv(backend=answering_backend()))
    with pytest.raises(OracleMisuse, match="runs only in `iba run`"):
        asyncio.run(agent.act(task, ds.history(task.user_id)))
    rec = asyncio.run(run_one(agent, "oracle", task, GoldTurns(), dataset="d", model="m", trial=0,
                              cfg=RunConfig(agents=["oracle"], progress=False)))
    assert rec.status == "ok" and _history_lines(rec.action.trace[-1].prompt_text or "") == []


def test_null_sees_no_history(demo_dir, tmp_path):
    ds = Dataset(demo_dir)
    backend, recs = _run(ds, tmp_path / "s.sqlite", ["null"])
    assert all(r.status == "ok" for r in recs.values())
    assert all(r.action.trace[0].outputs["kept_turns"] == 0 for r in recs.values())
    for messages, _ in backend.calls:
        assert _history_lines(messages[-1]["content"]) == []


def test_ray_refuses_the_oracle_before_any_work(demo_dir, tmp_path):
    pytest.importorskip("ray")
    from iba.run.ray_executor import BackendRecipe, RayError, run_dataset_ray

    with Store(tmp_path / "s.sqlite") as store:
        with pytest.raises(RayError, match="run it with --executor local"):
            asyncio.run(run_dataset_ray(Dataset(demo_dir), answering_backend(), store,
                                        RunConfig(agents=["null", "oracle"], progress=False),
                                        recipe=BackendRecipe("scripted:test")))
        assert list(store.runs()) == []


def test_superseded_adds_the_turns_of_old_values(demo_dir):
    ds = Dataset(demo_dir)
    keys = ds.answer_keys()
    task = next(t for t in ds.instances if any(e.superseded for e in keys[t.instance_id].evidence))
    old = {e.turn_id for e in keys[task.instance_id].evidence if e.superseded}
    history = ds.history(task.user_id)
    plain = history_for(make_agent("oracle", AgentEnv(backend=ScriptedBackend([]))), ds, task, history)
    more = history_for(make_agent("oracle?superseded=true", AgentEnv(backend=ScriptedBackend([]))), ds, task, history)
    assert {t.id for t in plain} == gold_ids(keys[task.instance_id]) and not old & {t.id for t in plain}
    assert {t.id for t in more} == gold_ids(keys[task.instance_id]) | old
    assert [t.id for t in more] == [t.id for t in history if t.id in {x.id for x in more}]  # time order
