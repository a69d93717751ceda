"""`iba run --batch` mechanics with a scripted model (fast): a multi-step agent takes one round per
step and judging one more, the replayed run scores what a direct run scores, a pending call is
stored nowhere, failed results are sent again and then given up as errored."""

from __future__ import annotations

import json

import pytest

from iba import registry
from iba.agents.base import Agent
from iba.batch.answer import answer_awaiting
from iba.batch.backend import BatchBackend
from iba.batch.folder import MAX_ATTEMPTS, BatchError, BatchFolder
from iba.batch.lines import ResultLine, ResultResponse
from iba.dataset import Dataset
from iba.run.runner import RunConfig, run_dataset
from iba.run.store import Store
from iba.types import Action, TraceStep
from tests.fakes import ScriptedBackend
from tests.run.helpers import tiny_dataset

STEPS = 3


class StepAgent(Agent):
    """STEPS model calls one after another, each quoting the previous reply (a multi-step agent)."""

    name = "steps"

    async def act(self, task, history):
        said, trace = "", []
        for i in range(STEPS):
            comp = await self.env.backend.complete([{"role": "user", "content": f"step {i} of {task.query}: {said}"}],
                                                   max_tokens=16, seed=self.env.seed)
            said = comp.text
            trace.append(TraceStep(step=f"s{i}", llm_calls=1, prompt_tokens=comp.prompt_tokens,
                                   completion_tokens=comp.completion_tokens))
        if task.action == "call_api":
            return Action(kind="call_api", api_name=task.api_name, params={"texture": "soft" if "2" in said else "regular"},
                          trace=trace)
        return Action(kind="generate", text=f"final: {said}", trace=trace)


def reply(messages, kwargs):
    """Deterministic: a judge (JSON asked) passes; a step echoes how many steps it has seen."""
    if kwargs.get("json_schema"):
        return {"passed": True, "rationale": "fine"}
    return f"seen {messages[-1]['content'].count('step')} ({messages[-1]['content'][:12]})"


@pytest.fixture(autouse=True)
def _agent():
    registry.register("agents", "steps", "tests.batch.test_backend:StepAgent")


def scores(store: Store) -> dict:
    return {(r.run_key, r.scorer): (r.score, [v.passed for v in r.verdicts]) for r in store.scores()}


async def test_rounds_per_step_and_scores_equal_a_direct_run(tmp_path):
    ds = Dataset(tiny_dataset(tmp_path / "ds"))
    cfg = RunConfig(agents=["steps"], progress=False, cache_dir=tmp_path / "cache")
    with Store(tmp_path / "direct.sqlite") as direct:
        scripted = ScriptedBackend(reply, model_id="scripted:m")
        await run_dataset(ds, scripted, direct, cfg, judges=[scripted])
        expected = scores(direct)
    assert expected and any(k[1].startswith("judge:") for k in expected)

    folder = BatchFolder(tmp_path / "b", create=True)
    answerer = ScriptedBackend(reply, model_id="scripted:m")
    rounds = 0
    with Store(tmp_path / "batch.sqlite") as store:
        while True:
            inner = ScriptedBackend(lambda m, k: pytest.fail("the batch backend called its model"), model_id="scripted:m")
            batch = BatchBackend(inner, folder)
            summary = await run_dataset(ds, batch, store, cfg, judges=[batch])
            round_dir, written, _ = folder.flush()
            if not summary.deferred:
                assert round_dir is None
                break
            rounds += 1
            if rounds == 1:  # nothing is stored while the first call of every item is pending
                assert not list(store.runs()) and written == 2
            counts = await answer_awaiting(folder, answerer, progress=False)
            assert counts["answered"] == written and counts["failed"] == 0
        assert rounds == STEPS + 1  # one per step, one for the judge
        assert scores(store) == expected
        assert all(r.status == "ok" for r in list(store.runs()))
        assert sum(r.usage.llm_calls for r in list(store.runs())) == 2 * STEPS  # replayed calls count as calls
    assert folder.status()["answered"] == folder.status()["requests"]


async def test_failed_results_are_sent_again_then_the_item_is_errored(tmp_path):
    ds = Dataset(tiny_dataset(tmp_path / "ds"))
    cfg = RunConfig(agents=["steps"], progress=False, cache_dir=tmp_path / "cache", instance_ids=["i1"], score=False)
    folder = BatchFolder(tmp_path / "b", create=True)
    inner = ScriptedBackend(["unused"], model_id="scripted:m")
    with Store(tmp_path / "s.sqlite") as store:
        for attempt in range(MAX_ATTEMPTS):
            summary = await run_dataset(ds, BatchBackend(inner, folder), store, cfg)
            assert summary.deferred == 1
            round_dir, written, waiting = folder.flush()
            assert written == 1 and waiting == 0, attempt  # re-sent after each failure
            # a rerun before any result comes back writes nothing new
            await run_dataset(ds, BatchBackend(inner, folder), store, cfg)
            assert folder.flush()[1:] == (0, 1)
            (cid,) = folder.awaiting()
            folder.add_results([ResultLine(custom_id=cid, error={"code": "batch_expired", "message": "expired"})], "x")
        summary = await run_dataset(ds, BatchBackend(inner, folder), store, cfg)
        assert summary.errored == 1 and "batch_expired" in list(store.runs())[0].error


async def test_a_rejected_request_is_errored_at_once(tmp_path):
    ds = Dataset(tiny_dataset(tmp_path / "ds"))
    cfg = RunConfig(agents=["steps"], progress=False, cache_dir=tmp_path / "cache", instance_ids=["i1"], score=False)
    folder = BatchFolder(tmp_path / "b", create=True)
    inner = ScriptedBackend(["unused"], model_id="scripted:m")
    with Store(tmp_path / "s.sqlite") as store:
        await run_dataset(ds, BatchBackend(inner, folder), store, cfg)
        folder.flush()
        (cid,) = folder.awaiting()
        folder.add_results([ResultLine(custom_id=cid, response=ResultResponse(
            status_code=400, body={"error": {"message": "context length exceeded"}}))], "x")
        summary = await run_dataset(ds, BatchBackend(inner, folder), store, cfg)
        assert summary.errored == 1 and "context length exceeded" in list(store.runs())[0].error


def test_folder_refuses_what_it_cannot_use(tmp_path):
    with pytest.raises(BatchError, match="not a batch folder"):
        BatchFolder(tmp_path)
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "f").write_text("mine")
    with pytest.raises(BatchError, match="not empty"):
        BatchFolder(tmp_path / "x", create=True)
    folder = BatchFolder(tmp_path / "b", create=True)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"custom_id": "iba-1", "response": {"status_code": 200, "body": {}}}\n')
    with pytest.raises(BatchError, match=r"bad.jsonl:1: custom_id 'iba-1' is not a request"):
        folder.read_results_file(bad)
    bad.write_text('\nnot json\n')
    with pytest.raises(BatchError, match=r"bad.jsonl:2: not a Batch API output line"):
        folder.read_results_file(bad)


def test_cli_import_status_and_errors(tmp_path, capsys):
    from iba.cli import main

    folder = BatchFolder(tmp_path / "b", create=True)
    from iba.batch.lines import request_line
    from iba.llm.base import ModelRequest

    line = request_line("openai:m", "m", ModelRequest(messages=[{"role": "user", "content": "hi"}], max_tokens=8))
    folder.want("openai:m", line)
    round_dir, written, _ = folder.flush()
    assert (round_dir / "openai_m.requests.jsonl").exists() and written == 1
    assert json.loads((round_dir / "openai_m.requests.jsonl").read_text())["custom_id"] == line.custom_id
    res = tmp_path / "answers.jsonl"
    res.write_text(json.dumps({"custom_id": line.custom_id, "response": {"status_code": 200, "body": {
        "id": "x", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hello"}, "finish_reason": "stop"}]}}}) + "\n")
    assert main(["batch", "import", str(tmp_path / "b"), str(res)]) == 0
    assert main(["batch", "status", str(tmp_path / "b")]) == 0
    assert "1 answered, 0 awaiting" in capsys.readouterr().out
    assert main(["batch", "status", str(tmp_path / "nope")]) == 2
    assert "not a batch folder" in capsys.readouterr().err


def test_run_refuses_batch_with_ray(tmp_path, capsys):
    from iba.cli import main

    ds = tiny_dataset(tmp_path / "ds")
    assert main(["run", str(ds), "--batch", str(tmp_path / "b"), "--executor", "ray", "--store",
                 str(tmp_path / "s.sqlite")]) == 2
    assert "--batch: not with --executor ray" in capsys.readouterr().err


def _answers(folder: BatchFolder, model: str, text: str = "fine") -> list[str]:
    """A results file's lines answering every awaiting request, as `model` (its body's name)."""
    from iba.batch.lines import completion_body
    from iba.llm.base import Completion

    return [json.dumps({"custom_id": cid, "response": {"status_code": 200, "body": completion_body(
        Completion(text=text, prompt_tokens=3, completion_tokens=1), model)}}) for cid in folder.awaiting()]


async def test_answers_from_another_model_are_recorded_and_warned_and_duplicates_refused(tmp_path, capsys, caplog):
    """Before: a results file was credited to the model asked whatever answered it, with no word
    said, and the same custom_id twice was taken silently (first wins)."""
    from iba.cli import main

    ds = Dataset(tiny_dataset(tmp_path / "ds"))
    cfg = RunConfig(agents=["direct?max_tokens=8"], progress=False, cache_dir=tmp_path / "cache",
                    instance_ids=["i0"])
    folder = BatchFolder(tmp_path / "b", create=True)
    inner = ScriptedBackend(lambda m, k: pytest.fail("the batch backend called its model"), model_id="openai:big")
    with Store(tmp_path / "s.sqlite") as store:
        batch = BatchBackend(inner, folder)
        assert (await run_dataset(ds, batch, store, cfg, judges=[batch])).deferred == 1
        folder.flush()
        lines = _answers(folder, "small-model")
        res = tmp_path / "answers.jsonl"
        res.write_text("\n".join(lines + lines) + "\n")  # every answer twice
        assert main(["batch", "import", str(tmp_path / "b"), str(res)]) == 2
        assert f"answers.jsonl:2: custom_id {json.loads(lines[0])['custom_id']!r} again (first on line 1)" in \
            capsys.readouterr().err
        res.write_text("\n".join(lines) + "\n")
        assert main(["batch", "import", str(tmp_path / "b"), str(res)]) == 0
        err = capsys.readouterr().err
        assert "answers.jsonl:1: answered by small-model, but the request asked big" in err
        assert main(["batch", "import", str(tmp_path / "b"), str(res)]) == 2  # an answer for an answered request
        assert "is answered already" in capsys.readouterr().err
        assert main(["batch", "status", str(tmp_path / "b")]) == 0
        assert "requests for big: 1 answered by small-model  <- another model" in capsys.readouterr().out
        folder.reload()
        with caplog.at_level("WARNING"):
            batch = BatchBackend(inner, folder)
            summary = await run_dataset(ds, batch, store, cfg, judges=[batch])
        assert summary.ok == 1 and "batch answers to openai:big come from small-model" in caplog.text
        folder.flush()  # the judge's call, answered by the small model too
        folder.add_results([ResultLine.model_validate_json(x) for x in _answers(
            folder, "small-model", json.dumps({"passed": True, "rationale": "ok"}))], "judge")
        batch = BatchBackend(inner, folder)
        await run_dataset(ds, batch, store, cfg, judges=[batch])
        [rec] = list(store.runs())
        [judged] = [r for r in store.scores() if r.scorer == "judge:openai:big"]
    assert rec.model == "openai:big"  # the run key is the model asked ...
    assert [s.answered_by for s in rec.action.trace if s.llm_calls] == [["small-model"]]  # ... the trace says who answered
    assert judged.score == 1.0 and {v.answered_by for v in judged.verdicts} == {"small-model"}


def test_a_dated_snapshot_is_the_same_model():
    from iba.batch.lines import same_model

    assert same_model("gpt-4o-mini", "gpt-4o-mini-2024-07-18") and same_model("m", "m") and same_model("m", None)
    assert not same_model("gpt-4o", "gpt-4o-mini") and not same_model("gpt-4o", "gpt-4o-mini-2024-07-18")
