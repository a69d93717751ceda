"""The inspect_ai task `iba/iba_bench`: our instances as samples, our agent as the solver, our scorers.

    inspect eval iba/iba_bench -T dataset=DIR -T agent=iba --model openai/NAME [--model-role grader=M]

- samples: one per selected instance (id = instance id, input = the request; metadata: domain,
  scenario, action and the public TaskView). The answer key is never in a sample: scorers read it.
- solver: the agent of `agent` (any spec `iba run --agent` takes) with inspect's model behind our
  Backend; its action becomes the sample's output, the RunRecord goes into the sample store. An
  infrastructure fault (the model's calls failed after inspect's retries, the action's timeout)
  raises, so inspect marks the sample errored and `--retry-on-error` / `inspect eval-retry` run it
  again; an agent's own failure is a 0 with its reason, as in `iba run`.
- scorers: one per registered scorer of the Task (run/task.py, the one `iba run` builds from the same
  arguments): `iba_slots` (CallAPI slot matching), `iba_verifiers` (deterministic checks) and
  `iba_judge` (checkpoint judging by the `grader` model role, else the eval's model), each a mean
  with its standard error over all samples plus the mean per domain (Table 4's columns). A judge
  reply that cannot be parsed leaves the sample unscored (NaN: left out of the means).
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from inspect_ai import Task as InspectTask
from inspect_ai import task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import ChatMessageAssistant, ModelOutput, get_model
from inspect_ai.scorer import Score, Target, grouped, mean, scorer, stderr
from inspect_ai.solver import Generate, TaskState, solver

from iba.agents.base import AgentEnv
from iba.dataset import Dataset
from iba.eval.scoring import score_record
from iba.inspect.backend import InspectBackend
from iba.dataset import dataset_id
from iba.run.runner import RunConfig, make_agent, run_one
from iba.run.task import Task, task_scorers
from iba.taxonomy import scenario_api
from iba.types import RunRecord, ScoreRecord, TaskView

RECORD = "iba_record"  # the sample store key of the RunRecord


def _names(value: str | list[str] | None) -> list[str] | None:
    if value is None or value == "":
        return None
    return [v.strip() for v in (value.split(",") if isinstance(value, str) else value) if v.strip()]


@lru_cache(maxsize=8)
def _load(dataset: str, cache_dir: str, answer_key: str | None) -> Dataset:
    """The dataset of a task's arguments, opened and checked once per process (solver and scorers
    take the arguments, plain strings that inspect logs, not the object)."""
    from iba.hf.load import open_dataset

    ds = open_dataset(dataset, cache_dir, answer_key=answer_key)
    ds.check(answer_key=not ds.held_back)
    return ds


@lru_cache(maxsize=8)
def _keys(dataset: str, cache_dir: str, answer_key: str | None) -> Any:
    """instance id -> AnswerKey; a held-back key is read one instance at a time, when scored."""
    from iba.run.runner import KeysOnDemand

    ds = _load(dataset, cache_dir, answer_key)
    return KeysOnDemand(ds) if ds.held_back else ds.answer_keys()


def bench_task(dataset: str, agent: str = "rag", *, limit: int | None = None,
               domains: str | list[str] | None = None, scenarios: str | list[str] | None = None,
               judges: bool = True, answer_key: str | None = None, cache_dir: str = ".iba-cache") -> Task:
    """The one Task (run/task.py) of the task arguments: the one `iba run` builds from the same
    arguments (RunConfig.task), so both take the same instances and apply the same scorers."""
    ds = _load(dataset, cache_dir, answer_key)
    bench = RunConfig(agents=[agent], limit=limit, domains=_names(domains), scenarios=_names(scenarios),
                      scorers=task_scorers(judged=judges)).task(ds)
    problem = bench.selection.problem(ds, ("-T domains", "-T scenarios", "-T users"))
    if problem:  # a typo would otherwise evaluate nothing
        raise ValueError(problem)
    return bench


def samples(bench: Task) -> list[Sample]:
    """One sample per instance of the Task."""
    return [Sample(id=t.instance_id, input=t.query,
                   metadata={"domain": t.domain, "scenario": t.scenario, "action": t.action, "user_id": t.user_id,
                             "task": t.model_dump(mode="json")})
            for t in bench.instances()]


@solver
def iba_agent(dataset: str, agent: str, *, answer_key: str | None = None, embedder: str = "minilm",
              cache_dir: str = ".iba-cache", seed: int = 42, timeout: float = 900.0, json_mode: str = "schema",
              context_window: int = 8192):
    """Run an IBA agent on the sample's task with the eval's model."""
    ds = _load(dataset, cache_dir, answer_key)
    cfg = RunConfig(agents=[agent], seed=seed, timeout_s=timeout, cache_dir=Path(cache_dir), embedder=embedder,
                    progress=False)

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        model = get_model()
        backend = InspectBackend(model, json_mode=json_mode, context_window=context_window)
        trial = max(0, state.epoch - 1)
        env = AgentEnv(backend=backend, cache_dir=cfg.cache_dir, embedder=embedder, seed=seed + trial,
                       scenarios=ds.scenario_names)
        task_view = TaskView.model_validate(state.metadata["task"])
        rec = await run_one(make_agent(agent, env, ds.hidden_paths), agent, task_view, ds.history(task_view.user_id),
                            dataset=dataset_id(ds), model=backend.model_id, trial=trial, cfg=cfg)
        if rec.status == "errored":  # inspect's error: shown, retried by --retry-on-error / eval-retry
            raise RuntimeError(f"iba: {rec.error.splitlines()[0] if rec.error else 'errored'}")
        state.store.set(RECORD, rec.model_dump(mode="json"))
        action = rec.action
        if action is None:
            text = f"(the agent failed: {(rec.error or '').splitlines()[0]})"
        elif action.kind == "generate":
            text = action.text or ""
        else:
            text = json.dumps({"api": action.api_name, "params": action.params}, ensure_ascii=False)
        state.output = ModelOutput.from_content(model=str(model), content=text)
        state.messages.append(ChatMessageAssistant(content=text, model=str(model)))
        return state

    return solve


def _score(rec: ScoreRecord | None) -> Score | None:
    if rec is None:
        return None
    verdicts = [v.model_dump(mode="json") for v in rec.verdicts]
    explanation = "; ".join(f"{v.target}: {'pass' if v.passed else 'fail' if v.passed is False else 'unscored'}"
                            + (f" ({v.rationale[:120]})" if v.rationale else "") for v in rec.verdicts)
    metadata = {"scorer": rec.scorer, "verdicts": verdicts, "failure": rec.failure}
    if rec.score is None:
        return Score.unscored(reason="unscored", explanation=explanation, metadata=metadata)
    return Score(value=rec.score, explanation=explanation, metadata=metadata)


async def _scored(keys: Any, state: TaskState, action: str, scorer: str, judges: list) -> Score | None:
    """The sample's score by registered scorer `scorer` (eval/scoring.py), on `action` tasks only."""
    raw = state.store.get(RECORD)
    if state.metadata.get("action") != action or raw is None:
        return None
    rec = RunRecord.model_validate(raw)
    task_view = TaskView.model_validate(state.metadata["task"])
    api = scenario_api(task_view.scenario) if task_view.action == "call_api" else None
    recs = await score_record(rec, keys[rec.instance_id], judges=judges, api_template=api, scorers=[scorer])
    return _score(recs[0] if recs else None)


METRICS = [grouped(mean(), "domain", all="samples"), stderr()]


def _scorer(name: str, action: str, doc: str):  # type: ignore[no-untyped-def]
    """The inspect scorer `iba_<name>`: registered scorer `name` on the samples of `action` tasks."""

    def make(dataset: str, cache_dir: str = ".iba-cache", answer_key: str | None = None, json_mode: str = "schema",
             context_window: int = 8192):  # type: ignore[no-untyped-def]
        keys = _keys(dataset, cache_dir, answer_key)

        async def score(state: TaskState, target: Target) -> Score | None:
            judges = [InspectBackend(get_model(role="grader", default=get_model()), json_mode=json_mode,
                                     context_window=context_window)] if name == "judge" else []
            return await _scored(keys, state, action, name, judges)

        return score

    make.__name__, make.__doc__ = f"iba_{name}", doc
    return scorer(metrics=METRICS, name=f"iba_{name}")(make)


iba_slots = _scorer("slots", "call_api", "CallAPI tasks: the share of personalization slots whose value the user's "
                    "preference accepts.")
iba_verifiers = _scorer("verifiers", "generate", "Generate tasks with checkable checkpoints: the share the "
                        "deterministic verifiers pass.")
iba_judge = _scorer("judge", "generate", "Generate tasks: the share of checkpoints the judge (model role `grader`, "
                    "else the eval's model) finds met, one call per checkpoint (the paper's protocol).")


@task
def iba_bench(
    dataset: str,
    agent: str = "rag",
    limit: int | None = None,
    domains: str | list[str] | None = None,
    scenarios: str | list[str] | None = None,
    judges: bool = True,
    answer_key: str | None = None,
    embedder: str = "minilm",
    cache_dir: str = ".iba-cache",
    seed: int = 42,
    timeout: float = 900.0,
    json_mode: str = "schema",
    context_window: int = 8192,
) -> InspectTask:
    """IBA-Bench on inspect.

    Args:
        dataset: an IBA dataset folder, an `iba export hf` folder, or a Hugging Face hub id (hf:owner/name).
        agent: an agent spec as `iba run --agent` takes it: direct, rag, iba, iba-fc, iba?btda=false...
        limit: the first N selected instances.
        domains: only these domain ids (comma-separated or a list).
        scenarios: only these scenario ids.
        judges: judge Generate checkpoints with the `grader` model role (else the eval's model); false:
            verifiers and slot matching only.
        answer_key: a held-back answer key kept outside the dataset folder.
        embedder: the retrieval embedder (minilm: offline).
        cache_dir: where the retrieval index cache (and a Hugging Face export read back) live.
        seed: the agents' seed (epoch e uses seed + e - 1).
        timeout: seconds per agent action before it is errored.
        json_mode: schema (inspect's response_schema; a provider that refuses it gets the schema in
            the prompt), json_object (response_format json_object with the schema: llama.cpp servers
            enforce it) or prompt (the schema in the prompt only).
        context_window: the model's context in tokens, for the agents' prompt budgets.
    """
    from iba import registry
    from iba.agents.base import parse_agent_spec
    from iba.agents.references import OracleAgent

    ds = _load(dataset, cache_dir, answer_key)
    name, _ = parse_agent_spec(agent)
    cls = registry.resolve("agents", name)  # an unknown agent fails here, with the known ones listed
    if cls is OracleAgent:
        raise ValueError("agent oracle: the oracle reference reads the answer key in iba's runner; run it with "
                         "`iba run --agent oracle`")
    if getattr(cls, "per_user", False):
        raise ValueError(f"-T agent={agent}: a memory agent ingests each user once, which inspect's per-sample "
                         "solver cannot do; run it with `iba run` (docs/memory_systems.md)")
    bench = bench_task(dataset, agent, limit=limit, domains=domains, scenarios=scenarios, judges=judges,
                       answer_key=answer_key, cache_dir=cache_dir)
    where = dict(cache_dir=cache_dir, answer_key=answer_key, json_mode=json_mode, context_window=context_window)
    # the Task's scorers as inspect scorers ("qa": no sample is a QA probe here)
    inspect_scorers = {"slots": iba_slots, "verifiers": iba_verifiers, "judge": iba_judge}
    return InspectTask(
        dataset=MemoryDataset(samples(bench), name=ds.name),
        solver=iba_agent(dataset, agent, answer_key=answer_key, embedder=embedder, cache_dir=cache_dir, seed=seed,
                         timeout=timeout, json_mode=json_mode, context_window=context_window),
        scorer=[inspect_scorers[n](dataset, **where) for n in bench.scorers if n in inspect_scorers],
        metadata={"iba_dataset": dataset_id(ds), "agent": agent, "generator": ds.manifest.generator,
                  "seed": ds.manifest.seed},
    )
