import asyncio
import json

import pytest

from iba import registry
from iba.agents.base import Agent
from iba.dataset import Dataset
from iba.run.runner import RunConfig, run_dataset
from iba.run.store import Store
from iba.types import Action
from tests.fakes import ScriptedBackend
from tests.run.helpers import SECRET_EXPECTED, tiny_dataset

SEEN: list[str] = []


class SpyAgent(Agent):
    """Records everything it is handed; answers trivially."""

    name = "spy"

    async def act(self, task, history):
        SEEN.append(json.dumps({"task": task.model_dump(), "history": [t.model_dump() for t in history],
                                "env": sorted(vars(self.env)), "options": self.options}))
        if self.options.get("fail") == task.instance_id:
            raise RuntimeError("model exploded")
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
        s1 = _run(ds, store, agents=["spy?fail=i0"])
        assert (s1.planned, s1.ok, s1.errored) == (2, 1, 1)
        recs = {r.instance_id: r for r in store.runs()}
        assert recs["i0"].status == "errored" and recs["i0"].action is None
        assert "model exploded" in recs["i0"].error
        assert recs["i1"].action.params == {"texture": "soft"}
        s2 = _run(ds, store, agents=["spy?fail=i0"])  # rerun: everything already stored
        assert (s2.skipped, s2.ok, s2.errored) == (2, 0, 0)
        s3 = _run(ds, store, agents=["spy"], trials=2)  # a new agent spec and trials are new keys
        assert (s3.planned, s3.ok) == (4, 4)
        # --retry-errored: only the errored record runs again; the ok one is kept
        n = len(list(store.runs()))
        s4 = _run(ds, store, agents=["spy?fail=i0"], retry_errored=True)
        assert (s4.retried, s4.skipped, s4.ok, s4.errored) == (1, 1, 0, 1)
        assert len(list(store.runs())) == n
        s5 = _run(ds, store, agents=["spy"], retry_errored=True)  # nothing errored under this spec
        assert (s5.retried, s5.skipped) == (0, 2)


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
    qa = [json.loads(s) for s in SEEN if "::qa::" in s]
    assert qa and "Pseudocode" in qa[0]["task"]["query"]


def test_unknown_agent_lists_choices(tmp_path):
    ds = Dataset(tiny_dataset(tmp_path / "ds"))
    with Store(tmp_path / "s.sqlite") as store, pytest.raises(KeyError, match="choose from:.*rag"):
        _run(ds, store, agents=["nope"])
