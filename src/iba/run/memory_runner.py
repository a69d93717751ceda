"""Memory agents (memory?cmd=/url=, iba.agents.memory) in `iba run`: user by user, ingest once.

run_dataset hands this module the work items whose agent is a memory system. They are grouped
per (agent spec, user, trial); each group is one MemorySession: a fresh state, one `ingest` per
session of the user's history in time order, then that user's tasks (and their QA probes) in plan
order, then `close`. Groups run concurrently (the run's --concurrency), the messages of one group
one at a time.

The rest is the runner's: each act goes through run_one and finish, so a task still has exactly
one RunRecord per run key, scored as any other. The ingest gets its own IngestRecord (store table
`ingests`): what the memory reported remembering cost (its replies' `usage`), how many sessions it
acknowledged, and the wall time. Resume follows from what is stored: a group whose tasks are all
stored is skipped; otherwise the user is ingested again from scratch (a memory does not outlive
its session) and only the missing tasks run. When the session is lost, the tasks it did not
answer are stored as the failure policy reads the loss: the memory's own failure (it crashed, or
said it could not ingest) fails them, scored 0; an infrastructure fault (a timeout, a kill from
outside, a server that cannot be reached) errors them, and `--retry-errored` ingests the user
again. A run stopped mid-ingest stores nothing for that user: the next run starts it over.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from iba import __version__
from iba.agents.base import Agent
from iba.agents.memory import MemoryAgent, MemorySession, sessions_of
from iba.dataset import Dataset
from iba.llm.base import Backend, CallDeferred
from iba.run.failures import classify
from iba.run.runner import Plan, RunConfig, WorkItem, claim_ttl, elsewhere, errored_record, finish, run_one
from iba.run.store import Store
from iba.types import IngestRecord, TaskView, Usage, stable_hash


@dataclass
class Group:
    """One memory session's work: an agent spec's items for one user and trial, in plan order."""

    spec: str
    user_id: str
    trial: int
    items: list[WorkItem]


def is_memory(agent: Agent) -> bool:
    return bool(getattr(agent, "per_user", False))


def split(todo: Sequence[WorkItem], agent_for: Callable[[str, int], Agent]) -> tuple[list[WorkItem], list[Group]]:
    """(the items other agents run one by one, the memory agents' groups)."""
    rest: list[WorkItem] = []
    groups: dict[tuple[str, str, int], Group] = {}
    for item in todo:
        if is_memory(agent_for(item.spec, item.trial)):
            key = (item.spec, item.task.user_id, item.trial)
            groups.setdefault(key, Group(item.spec, item.task.user_id, item.trial, [])).items.append(item)
        else:
            rest.append(item)
    return rest, list(groups.values())


def ingest_key(dataset: str, user_id: str, agent: str, model: str, trial: int) -> str:
    return stable_hash(["ingest", dataset, user_id, agent, model, trial], 24)


def check_tasks(ds: Dataset, tasks: Sequence[TaskView], specs: Sequence[str], agent_for: Callable[[str, int], Agent]) -> None:
    """Before any work: a memory agent's tasks must all come after their user's history (DatasetError)."""
    if any(is_memory(agent_for(spec, 0)) for spec in specs):
        ds.check_tasks_after_history(tasks)


def _lost(item: WorkItem, status: str, error: str, *, plan: Plan, cfg: RunConfig, sandbox: str | None) -> Any:
    """The record of a task its memory session could not answer (lost before or at its turn)."""
    rec = errored_record(item.spec, item.task, dataset=plan.dataset, model=plan.model, trial=item.trial, cfg=cfg,
                         error=error)
    return rec.model_copy(update={"status": status, "sandbox": sandbox})


async def _ingest(session: MemorySession, group: Group, ds: Dataset, *, plan: Plan, cfg: RunConfig, store: Store,
                  keys: list[str], bar: Any) -> IngestRecord:
    """Start the session and send the user's whole history; the IngestRecord says how it went."""
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    t0 = time.perf_counter()
    usage, done, status, error = Usage(), 0, "ok", None
    history = ds.history(group.user_id)
    sessions = sessions_of(history)
    try:
        ack = await session.start()
        usage = usage.add(ack.usage or Usage())
        for i, (session_id, turns) in enumerate(sessions):
            bar.set_postfix_str(f"{group.user_id}: ingesting {i + 1}/{len(sessions)}", refresh=True)
            ack = await session.ingest(session_id, turns, i, len(sessions))
            usage = usage.add(ack.usage or Usage())
            done += 1
            for k in keys:  # a long ingest keeps its claims: no other process takes the user meanwhile
                store.claim(k, claim_ttl(cfg))
    except Exception as e:  # the memory's failure or a fault: its tasks say so (run_group)
        status, error = classify(e), f"{type(e).__name__}: {e}"
    return IngestRecord(
        key=ingest_key(plan.dataset, group.user_id, group.spec, plan.model, group.trial), run=cfg.run,
        dataset=plan.dataset, user_id=group.user_id, agent=group.spec, model=plan.model, trial=group.trial,
        seed=session.seed, status=status, sessions=len(sessions), ingested=done, turns=len(history),  # type: ignore[arg-type]
        usage=usage, wall_s=round(time.perf_counter() - t0, 3), error=error, started_at=started,
        iba_version=__version__, sandbox=session.sandbox)


async def run_group(group: Group, agent: MemoryAgent, ds: Dataset, *, plan: Plan, store: Store, cfg: RunConfig,
                    bar: Any, sem: asyncio.Semaphore, judges: Sequence[Backend] = ()) -> None:
    """One user's memory session: claim its items, ingest, act on each, store every record, close."""
    async with sem:
        mine: list[WorkItem] = []
        for item in group.items:
            if store.claim(item.key, claim_ttl(cfg)):
                mine.append(item)
            else:  # another process on this store runs it (with its own session for this user)
                await elsewhere(plan, item.task.instance_id, store, cfg, bar, judges=judges)
        if not mine:
            return
        session = agent.session(group.user_id, seed=cfg.seed + group.trial)
        try:
            rec = store.put_ingest(await _ingest(session, group, ds, plan=plan, cfg=cfg, store=store,
                                                 keys=[i.key for i in mine], bar=bar))
            plan.summary.ingests += 1
            plan.summary.ingest_usage = plan.summary.ingest_usage.add(rec.usage)
            for n, item in enumerate(mine):
                if rec.status != "ok":
                    run = _lost(item, rec.status, f"not run: the memory lost this user during ingest "
                                f"({rec.ingested}/{rec.sessions} sessions): {rec.error}", plan=plan, cfg=cfg,
                                sandbox=session.sandbox)
                elif session.dead is not None:
                    run = _lost(item, "errored", f"not run: the memory session ended at an earlier task of "
                                f"this user: {session.dead}", plan=plan, cfg=cfg, sandbox=session.sandbox)
                else:
                    run = await run_one(session, item.spec, item.task, [], dataset=plan.dataset,  # type: ignore[arg-type]
                                        model=plan.model, trial=item.trial, cfg=cfg)
                try:
                    await finish(plan, run, store, cfg, bar, judges=judges)
                except CallDeferred:  # its judging awaits a batch answer (iba run --batch): a later run goes on
                    plan.summary.deferred += 1
                store.release(item.key)
                for later in mine[n + 1:]:  # acts take their time: the rest stay claimed
                    store.claim(later.key, claim_ttl(cfg))
        finally:
            await session.close()
            for item in mine:
                store.release(item.key)
