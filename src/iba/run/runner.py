"""Run agents over a dataset: one RunRecord per (instance, agent spec, model, trial), resumable.

The runner is the only place that holds both sides of the wall: it hands an agent the public
TaskView and history, stores what comes back, and only then (optionally) gives the stored record
and the hidden AnswerKey to the scorer. An exception becomes a `failed` record (the agent's own
failure, scored 0) or an `errored` one (an infrastructure fault, unscored) by run/failures.py,
never a made-up action; a key already in the store is skipped, so rerunning the same command
resumes, and several processes on one store split the work by claiming keys.
"""

from __future__ import annotations

import asyncio
import time
import traceback
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from iba import __version__, cancel, registry
from iba.agents.base import Agent, AgentEnv, parse_agent_spec
from iba.dataset import Dataset, DatasetError, dataset_id
from iba.eval.qa import qa_prompt
from iba.eval.scoring import DEFAULT_SCORERS, api_template_for, score_record
from iba.llm.base import Backend, CallDeferred
from iba.run.failures import classify
from iba.run.oracle import history_for
from iba.run.sample import bind_sample
from iba.run.selection import Selection
from iba.run.store import Store
from iba.run.task import Task
from iba.types import Action, AnswerKey, QAProbe, RunRecord, TaskView, Turn, Usage, item_id, stable_hash


@dataclass
class RunConfig:
    agents: list[str]
    run: str = "default"
    trials: int = 1
    seed: int = 42
    concurrency: int = 1
    limit: int | None = None
    domains: list[str] | None = None
    scenarios: list[str] | None = None
    users: list[str] | None = None  # only these users' instances
    instance_ids: list[str] | None = None  # only these instances, in this order (a fixed sample)
    qa: bool = False  # also ask each instance's QA probes (knowledge-to-action gap)
    qa_per_instance: int | None = None  # at most this many probes per instance (None: all)
    score: bool = True
    judge_repeats: int = 1
    timeout_s: float = 900.0
    cache_dir: Path = field(default_factory=lambda: Path(".iba-cache"))
    embedder: str = "minilm"
    progress: bool = True
    retry_errored: bool = False  # drop this selection's errored records first, so they run again
    hidden: tuple[str, ...] = ()  # more files no agent may be shown (Agent.hide), beside the dataset's own
    sample: int | None = None  # `--sample N`: a stratified sample of N of the selected instances (run/sample.py)
    sample_seed: int = 0
    scorers: tuple[str, ...] = DEFAULT_SCORERS  # registered scorer names (eval/scoring.py)

    def task(self, ds: Dataset) -> Task:
        """The one Task this run executes (run/task.py): the inspect task builds the same."""
        return Task(ds, self.selection, tuple(self.agents), tuple(self.scorers))

    @property
    def selection(self) -> Selection:
        """The instances this run takes (run/selection.py: the inspect task applies the same)."""
        return Selection(instance_ids=self.instance_ids, domains=self.domains, scenarios=self.scenarios,
                         users=self.users, sample=self.sample, sample_seed=self.sample_seed, limit=self.limit)


@dataclass
class RunSummary:
    planned: int = 0
    skipped: int = 0  # already in the store (resume)
    retried: int = 0  # errored records dropped by --retry-errored
    ok: int = 0
    failed: int = 0  # the agent's own failures: stored, scored 0
    errored: int = 0  # infrastructure faults: stored unscored; `--retry-errored` runs them again
    rescored: int = 0  # stored records that had no scores yet (a killed run, --no-score) and got them
    elsewhere: int = 0  # claimed or stored by another process on the same store while this one ran
    usage: Usage = field(default_factory=Usage)
    wall_s: float = 0.0
    errors: list[str] = field(default_factory=list)  # "failed: ..." / "errored: ..." lines, in run order
    # what the selection still owes after the run, whenever it was stored: errored run records
    # (--retry-errored) and score records whose judge call failed (judged again by a rerun)
    errored_total: int = 0
    judge_errored: int = 0
    # `iba run --batch`: items whose action or scoring stopped at a call that awaits its batch answer
    # (not stored, or stored unscored; the next run with the answers goes on from there)
    deferred: int = 0
    notes: list[str] = field(default_factory=list)  # lines for the user (a sample recorded)
    # memory agents (run/memory_runner.py): users ingested by this run, and what their memories
    # reported ingesting cost (the acts' cost is in `usage`, as every agent's)
    ingests: int = 0
    ingest_usage: Usage = field(default_factory=Usage)


def run_key(dataset: str, instance_id: str, agent: str, model: str, trial: int, probe: str | None = None) -> str:
    """A QA probe's key hashes "<instance>::qa::<probe>" (types.common.item_id), as the first stores did."""
    return stable_hash([dataset, item_id(instance_id, probe), agent, model, trial], 24)


def qa_task(task: TaskView, probe: QAProbe) -> TaskView:
    """The QA probe as a plain generate task for the same agent (same history, same time)."""
    return TaskView(instance_id=task.instance_id, probe=probe.id, user_id=task.user_id, domain=task.domain,
                    scenario=task.scenario, scenario_name=task.scenario_name, query=qa_prompt(probe),
                    action="generate", now=task.now)


def make_agent(spec: str, env: AgentEnv, hidden: Sequence[str] = ()) -> Agent:
    """The agent of `spec`; `hidden`: the evaluator's files it must never be shown (Agent.hide)."""
    name, options = parse_agent_spec(spec)
    cls = registry.resolve("agents", name)
    agent = cls(env, **options)
    agent.hide(hidden)
    return agent


def _usage_of(action: Action | None, steps: Sequence[Any] = ()) -> Usage:
    """Summed usage of an action's trace steps (or of `steps`, those an exception carried)."""
    u = Usage()
    for step in (action.trace if action else steps):
        u = u.add(Usage.of_step(step))
    return u


async def run_one(
    agent: Agent,
    spec: str,
    task: TaskView,
    history: list[Turn],
    *,
    dataset: str,
    model: str,
    trial: int,
    cfg: RunConfig,
) -> RunRecord:
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    t0 = time.perf_counter()
    action: Action | None = None
    error: str | None = None
    status = "ok"
    usage: Usage | None = None
    partial: list[Any] = []
    try:
        with cancel.scope() as stop_work:  # the action's threads see it (iba.cancel)
            try:
                # asyncio.timeout, not wait_for: on 3.11 wait_for swallows a cancellation (Ctrl-C) that
                # arrives as the action finishes, and the run would go on
                async with asyncio.timeout(cfg.timeout_s):
                    action = await agent.act(task, history)
            except asyncio.TimeoutError:
                stop_work.set()  # stop the embedding or generation the cancelled coroutine left running
                raise
        if action.kind != task.action:
            # the agent's failure; the action is kept so the report can show what it did
            status, error = "failed", f"invalid action: the agent returned a {action.kind} action for a {task.action} task"
    except asyncio.TimeoutError:
        status, error = "errored", f"TimeoutError: agent took longer than {cfg.timeout_s:.0f}s"
    except Exception as e:  # the agent's failure or a fault is data: record it, keep going
        status = classify(e)
        error = f"{type(e).__name__}: {e}"
        tb = traceback.format_exc(limit=3)
        error += "\n" + tb[-1500:]
        # the steps that ran before the exception (agents.trace attaches them): their calls count,
        # and a failed record keeps them for the report's attribution
        partial = list(getattr(e, "iba_trace", None) or [])
        usage = _usage_of(None, partial)
    return RunRecord(
        **_item(spec, task, dataset=dataset, model=model, trial=trial, cfg=cfg),
        status=status,  # type: ignore[arg-type]
        action=action if status != "errored" else None,
        error=error,
        partial_trace=partial if status == "failed" else [],
        usage=usage if usage is not None else _usage_of(action),
        latency_s=round(time.perf_counter() - t0, 3),
        prompt_hashes={s.prompt: s.prompt_hash for s in (action.trace if action else []) if s.prompt and s.prompt_hash},
        started_at=started,
        sandbox=getattr(agent, "sandbox", None),
    )


def _item(spec: str, task: TaskView, *, dataset: str, model: str, trial: int, cfg: RunConfig) -> dict[str, Any]:
    """The fields of a record that name its item (run_one's and errored_record's alike)."""
    return dict(key=run_key(dataset, task.instance_id, spec, model, trial, task.probe), run=cfg.run, dataset=dataset,
                instance_id=task.instance_id, probe=task.probe, user_id=task.user_id, domain=task.domain,
                scenario=task.scenario, agent=spec, model=model, trial=trial, seed=cfg.seed + trial,
                iba_version=__version__)


def errored_record(spec: str, task: TaskView, *, dataset: str, model: str, trial: int, cfg: RunConfig,
                   error: str) -> RunRecord:
    """The record of an item lost to the infrastructure outside the agent (a Ray worker that died
    under it): the same fields as run_one's, errored, so it is unscored and --retry-errored reruns it."""
    return RunRecord(**_item(spec, task, dataset=dataset, model=model, trial=trial, cfg=cfg), status="errored",
                     error=error, started_at=datetime.now(timezone.utc).isoformat(timespec="seconds"))


@dataclass
class WorkItem:
    """One (agent spec, task, trial) to run, with its run key."""

    spec: str
    task: TaskView
    trial: int
    key: str


@dataclass
class Plan:
    """A run after resume, as every executor starts it: the items still to run and the summary so far."""

    dataset: str  # dataset_id(ds), the first part of every key
    model: str
    todo: list[WorkItem]
    summary: RunSummary
    tasks: dict[str, TaskView]  # instance id -> task, for scoring
    keys: Mapping[str, AnswerKey]
    t_start: float
    selection: list[str] = field(default_factory=list)  # every run key of the selection, stored or not
    # a held-back key is read for an instance only once every agent run of it in this plan has
    # finished: the runs still to come per instance, and the records waiting for them
    pending: dict[str, int] = field(default_factory=dict)
    deferred: dict[str, list[RunRecord]] = field(default_factory=dict)

    def settle(self, instance_id: str, rec: RunRecord | None) -> list[RunRecord]:
        """One run of `instance_id` is over (`rec` stored by this process, or None: by another);
        the records to score now: `rec` itself, or, for a held-back key, every record of the
        instance once its last run is over (none before)."""
        if instance_id not in self.pending:
            return [rec] if rec is not None else []
        self.pending[instance_id] -= 1
        if rec is not None:
            self.deferred.setdefault(instance_id, []).append(rec)
        if self.pending[instance_id] > 0:
            return []
        del self.pending[instance_id]
        return self.deferred.pop(instance_id, [])


class KeysOnDemand(Mapping[str, AnswerKey]):
    """A held-back answer key (`iba run --answer-key`), read one instance at a time when scoring
    asks for it, i.e. once that item's agents have finished; nothing is loaded before or kept.
    An instance the key lacks is a DatasetError (its record stays stored, unscored)."""

    def __init__(self, ds: Dataset) -> None:
        self.ds = ds

    def __getitem__(self, instance_id: str) -> AnswerKey:
        key = self.ds.answer_key_for(instance_id)
        if key is None:
            raise DatasetError(f"{self.ds.answer_key_path}: no answer key for instance {instance_id!r}")
        return key

    def __iter__(self) -> Iterator[str]:  # listing every id would mean reading the key up front
        raise TypeError("a held-back answer key is read one instance at a time")

    def __len__(self) -> int:
        raise TypeError("a held-back answer key is read one instance at a time")


def hidden_paths(ds: Dataset, cfg: RunConfig) -> tuple[str, ...]:
    """The files agents must never see: the dataset's key and distractor labels (held back or not)."""
    return tuple(dict.fromkeys([*ds.hidden_paths, *cfg.hidden]))


async def plan_run(ds: Dataset, model: str, store: Store, cfg: RunConfig, *, judges: Sequence[Backend] = ()) -> Plan:
    """The work list and its keys; --retry-errored, stale claims swept, stored keys skipped, and stored
    records that lack scores scored now. Every executor starts here, so their keys are the same."""
    did = dataset_id(ds)
    tasks = cfg.task(ds).instances()
    # one selection per dataset and store: a sample's tables never take in other results (run/sample.py)
    sample_note = bind_sample(store, did, cfg.selection.sample_record(ds), [t.instance_id for t in tasks])
    keys: Mapping[str, AnswerKey] = {}
    if ds.held_back and cfg.score:
        keys = KeysOnDemand(ds)
    elif cfg.qa or cfg.score:
        keys = ds.answer_keys()
    by_id = {t.instance_id: t for t in ds.instances}
    summary = RunSummary(notes=[sample_note] if sample_note else [])
    t_start = time.perf_counter()

    # a held-back key is opened for an item only once its agents have finished: its QA probes (in the
    # key) are planned only for items whose every task run is stored, a later pass (iba run --qa
    # runs the tasks first); the others get theirs when a rerun finds their tasks done
    done = {t.instance_id for t in tasks if all(store.has_run(run_key(did, t.instance_id, s, model, tr))
                                                for s in cfg.agents for tr in range(cfg.trials))} \
        if ds.held_back and cfg.qa else None

    # (agent spec, task, trial) work items, QA probes after their task
    work: list[tuple[str, TaskView, int]] = []
    for spec in cfg.agents:
        for task in tasks:
            for trial in range(cfg.trials):
                work.append((spec, task, trial))
                if cfg.qa and (done is None or task.instance_id in done):
                    for probe in keys[task.instance_id].qa[: cfg.qa_per_instance]:
                        work.append((spec, qa_task(task, probe), trial))
    summary.planned = len(work)
    keys_of = [run_key(did, w[1].instance_id, w[0], model, w[2], w[1].probe) for w in work]
    if cfg.retry_errored:
        summary.retried = store.drop_errored(keys_of)
    store.sweep_claims()  # a killed run's claims must not outlive it
    stored = {k for k in keys_of if store.has_run(k)}
    todo = [WorkItem(*w, key=k) for w, k in zip(work, keys_of) if k not in stored]
    summary.skipped = len(work) - len(todo)
    plan = Plan(did, model, todo, summary, by_id, keys, t_start, selection=keys_of)
    if isinstance(keys, KeysOnDemand):
        for item in todo:
            plan.pending[item.task.instance_id] = plan.pending.get(item.task.instance_id, 0) + 1
    if cfg.score:
        # Resume never loses scoring: a record stored before all its scores were (a kill between
        # the writes, or an earlier --no-score) gets the missing ones now; score_record computes
        # only the (scorer, repeat) pairs not stored, so a fully scored record costs two lookups.
        for k in keys_of:
            if k in stored:
                rec = store.get_run(k)
                if rec is not None and rec.instance_id in plan.pending:  # held back: after this run's agents
                    plan.deferred.setdefault(rec.instance_id, []).append(rec)
                elif rec is not None:
                    try:
                        if await score_stored(rec, by_id, keys, store, judges=judges, judge_repeats=cfg.judge_repeats, scorers=cfg.scorers):
                            summary.rescored += 1
                    except CallDeferred:  # a judge call awaits its batch answer
                        summary.deferred += 1
    return plan


def claim_ttl(cfg: RunConfig) -> float:
    """A claim outlives the action's timeout and its scoring; after that another process may take it."""
    return cfg.timeout_s + 900.0


async def finish(plan: Plan, rec: RunRecord, store: Store, cfg: RunConfig, bar: Any, *,
                 judges: Sequence[Backend] = ()) -> None:
    """Store a finished record, count it in the summary, and score it (if cfg.score)."""
    summary = plan.summary
    if not store.put_run(rec):  # another process stored it first (its claim had expired)
        await elsewhere(plan, rec.instance_id, store, cfg, bar, judges=judges)
        return
    summary.usage = summary.usage.add(rec.usage)
    setattr(summary, rec.status, getattr(summary, rec.status) + 1)
    if rec.status != "ok":
        what = rec.instance_id + (f" (QA probe {rec.probe})" if rec.probe else "")
        summary.errors.append(f"{rec.status}: {what} [{rec.agent}]: {rec.error.splitlines()[0] if rec.error else ''}")
    if cfg.score:
        for r in plan.settle(rec.instance_id, rec):
            await score_stored(r, plan.tasks, plan.keys, store, judges=judges, judge_repeats=cfg.judge_repeats, scorers=cfg.scorers)
    bar.update(1)
    bar.set_postfix(ok=summary.ok, failed=summary.failed, errored=summary.errored)


async def elsewhere(plan: Plan, instance_id: str, store: Store, cfg: RunConfig, bar: Any, *,
                    judges: Sequence[Backend] = ()) -> None:
    """An item another process claimed or stored: counted, and no longer awaited for scoring."""
    plan.summary.elsewhere += 1
    if cfg.score:
        for r in plan.settle(instance_id, None):
            await score_stored(r, plan.tasks, plan.keys, store, judges=judges, judge_repeats=cfg.judge_repeats, scorers=cfg.scorers)
    bar.update(1)


class LocalDispatch:
    """Where run_dataset's agents run: here, one agent per (spec, trial) and each user's history read
    once; a subclass sends the items elsewhere (run/ray_executor.py: to Ray workers, which run them
    with a LocalDispatch). `check` refuses an agent spec before any work, `open` starts what runs the
    plan's items and says how many may be in flight, `produce` makes an item's record."""

    def __init__(self, ds: Dataset, backend: Backend, cfg: RunConfig, hidden: Sequence[str]) -> None:
        self.ds, self.backend, self.cfg, self.hidden = ds, backend, cfg, hidden
        self.agents: dict[tuple[str, int], Agent] = {}
        self.histories: dict[str, list[Turn]] = {}

    def agent(self, spec: str, trial: int) -> Agent:
        if (spec, trial) not in self.agents:
            env = AgentEnv(backend=self.backend, cache_dir=self.cfg.cache_dir, embedder=self.cfg.embedder,
                           seed=self.cfg.seed + trial, scenarios=self.ds.scenario_names)
            self.agents[(spec, trial)] = make_agent(spec, env, self.hidden)
        return self.agents[(spec, trial)]

    async def run(self, spec: str, task: TaskView, trial: int, dataset: str,
                  keys: Mapping[str, AnswerKey] | None = None) -> RunRecord:
        """One item's record (`keys`: the plan's, which the oracle's gold turns are read from)."""
        if task.user_id not in self.histories:
            self.histories[task.user_id] = self.ds.history(task.user_id)
        agent = self.agent(spec, trial)
        return await run_one(agent, spec, task, history_for(agent, self.ds, task, self.histories[task.user_id], keys),
                             dataset=dataset, model=self.backend.model_id, trial=trial, cfg=self.cfg)

    def check(self) -> None:
        pass  # every agent runs here

    async def open(self, plan: Plan) -> int:
        return max(1, self.cfg.concurrency)

    async def produce(self, item: WorkItem, plan: Plan) -> RunRecord:
        return await self.run(item.spec, item.task, item.trial, plan.dataset, plan.keys)

    async def close(self) -> None:
        pass


async def run_dataset(
    ds: Dataset,
    backend: Backend,
    store: Store,
    cfg: RunConfig,
    *,
    judges: Sequence[Backend] = (),
    dispatch: LocalDispatch | None = None,
) -> RunSummary:
    """Run every selected (instance, agent, trial) not yet in the store; score inline if judges.
    `dispatch` runs the agents (default: here); the plan, the claims, storing and scoring are this
    function's whichever runs them, so the keys and records are the same."""
    dispatch = dispatch or LocalDispatch(ds, backend, cfg, hidden_paths(ds, cfg))
    dispatch.check()
    plan = await plan_run(ds, backend.model_id, store, cfg, judges=judges)
    summary = plan.summary
    for spec in cfg.agents:  # fail fast on a bad agent spec, before any model work
        dispatch.agent(spec, 0)
    from tqdm.auto import tqdm

    # memory agents run user by user, ingesting each history once (their own small code path)
    from iba.run import memory_runner

    memory_runner.check_tasks(ds, cfg.task(ds).instances(), cfg.agents, dispatch.agent)
    todo, groups = memory_runner.split(plan.todo, dispatch.agent)
    bar = tqdm(total=len(plan.todo), desc=f"run {cfg.run}", unit="task", disable=not cfg.progress)

    async def one(item: WorkItem, sem: asyncio.Semaphore) -> None:
        async with sem:  # claimed only at its turn: a claim made long before could expire while it waits
            if not store.claim(item.key, claim_ttl(cfg)):  # another process runs it (or just stored it)
                await elsewhere(plan, item.task.instance_id, store, cfg, bar, judges=judges)
                return
            try:
                await finish(plan, await dispatch.produce(item, plan), store, cfg, bar, judges=judges)
            except CallDeferred:  # the action, or its judging, awaits a batch answer: a later run goes on
                summary.deferred += 1
            finally:
                store.release(item.key)

    try:
        sem = asyncio.Semaphore(await dispatch.open(plan))
        work = [asyncio.ensure_future(one(item, sem)) for item in todo] + [asyncio.ensure_future(
            memory_runner.run_group(g, dispatch.agent(g.spec, g.trial), ds, plan=plan, store=store,  # type: ignore[arg-type]
                                    cfg=cfg, bar=bar, sem=sem, judges=judges)) for g in groups]
        try:
            await asyncio.gather(*work)
        except BaseException:
            # stop the others too (their claims are released) before what runs them is closed
            for w in work:
                w.cancel()
            await asyncio.gather(*work, return_exceptions=True)
            raise
    finally:
        bar.close()
        await dispatch.close()
    # what the selection still owes, whenever it was stored: errored runs, errored judge calls
    summary.errored_total, summary.judge_errored = store.count_errored(plan.selection)
    summary.wall_s = round(time.perf_counter() - plan.t_start, 2)
    return summary


async def score_stored(
    rec: RunRecord,
    tasks: dict[str, TaskView],
    keys: Mapping[str, AnswerKey],
    store: Store,
    *,
    judges: Sequence[Backend],
    judge_repeats: int = 1,
    scorers: Sequence[str] = DEFAULT_SCORERS,
) -> int:
    """Score one stored record (task, QA probe or errored) unless already scored; returns how many
    ScoreRecords it wrote (0 for a generate task with neither judges nor verifiers)."""
    key, task = keys.get(rec.instance_id), tasks.get(rec.instance_id)
    if key is None or task is None:
        return 0
    return len(await score_record(rec, key, judges=list(judges), judge_repeats=judge_repeats,
                                   api_template=api_template_for(rec, key), store=store, scorers=scorers))


