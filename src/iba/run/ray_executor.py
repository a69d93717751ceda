"""`iba run --executor ray`: the local executor's run, with the agents spread over a Ray cluster.

The driver (the `iba run` process) does everything around the agents exactly as the local
executor does, with the same code (runner.run_dataset, given a RayDispatch): the work list and its
keys, --retry-errored, resume and rescoring, a claim in the store before an item goes out, storing
and scoring each record that comes back. So SQLite keeps a single writer, and a run interrupted under
one executor finishes under the other with one record per key.

Each worker is a Ray actor that builds its own backend from the model string and options (a
llama.cpp model loads inside the actor; a backend is never pickled), its own agents, and reads
histories from the dataset path. Retrieval indexes go to the on-disk index cache, whose writes are
atomic and locked per key, so workers on one host (or on a shared filesystem) embed each history once.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from iba import registry
from iba.dataset import Dataset
from iba.llm.base import Backend
from iba.run.runner import (LocalDispatch, Plan, RunConfig, RunSummary, WorkItem, errored_record,
                            hidden_paths, run_dataset)
from iba.run.oracle import reads_key
from iba.run.store import Store
from iba.types import RunRecord, TaskView

RAY_INSTALL = "pip install 'iba[ray]'"
# A worker process that dies (OOM kill, a crash in native code) is restarted by Ray, up to
# MAX_RESTARTS times, and the items it had in flight are sent again once (TASK_RETRIES): a death
# caused by another item costs nothing, and an item that kills its worker on every attempt ends
# as an errored record instead of taking the run down.
MAX_RESTARTS = 10
TASK_RETRIES = 1


class RayError(RuntimeError):
    """Ray cannot run this: not installed, no cluster at the address, a worker that cannot start."""


class RayMissing(RayError):
    """Ray is not installed in this environment."""


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise RayMissing(f"--executor ray needs Ray, which is not installed: install iba[ray] ({RAY_INSTALL})") from None
    return ray


@dataclass(frozen=True)
class BackendRecipe:
    """How a worker builds its own backend: `resolve_backend(model, **options)`."""

    model: str
    options: dict[str, Any] = field(default_factory=dict)

    def build(self) -> Backend:
        from iba.llm import resolve_backend

        return resolve_backend(self.model, **self.options)


@dataclass
class RayOptions:
    address: str | None = None  # None: $RAY_ADDRESS if set, else a fresh local cluster on 127.0.0.1
    workers: int | None = None  # actors; None: one per `cpus_per_worker` CPUs of the cluster
    cpus_per_worker: float = 1.0


def init_ray(address: str | None, num_cpus: int | None = None) -> bool:
    """Connect to (or start) Ray unless this process already did; True when this call did it
    (the caller then shuts it down). A local cluster listens on 127.0.0.1 only."""
    ray = import_ray()
    if ray.is_initialized():
        return False
    address = address or os.environ.get("RAY_ADDRESS") or None
    try:
        if address is None:
            ray.init(address="local", num_cpus=num_cpus, include_dashboard=False, _node_ip_address="127.0.0.1",
                     logging_level="WARNING")
        else:
            ray.init(address=address, logging_level="WARNING")
    except (ConnectionError, ValueError) as e:
        where = f"at {address!r}" if address else "locally"
        raise RayError(f"cannot start or join a Ray cluster {where}: {e}; check --ray-address "
                       "(or $RAY_ADDRESS), or leave it out for a local cluster") from None
    return True


class RayWorker:
    """One Ray actor: its own backend, agents and histories (a LocalDispatch); runs one item per call."""

    def __init__(self, dataset_root: str, recipe: BackendRecipe, cfg: RunConfig,
                 table: dict[str, dict[str, str]]) -> None:
        registry.restore(table)
        self.backend = recipe.build()
        self.local = LocalDispatch(Dataset(dataset_root), self.backend, cfg, cfg.hidden)

    def model_id(self) -> str:
        return self.backend.model_id

    async def run(self, spec: str, task_json: str, trial: int, dataset: str) -> str:
        """The RunRecord (as JSON: no pickled pydantic across versions) of one item."""
        rec = await self.local.run(spec, TaskView.model_validate_json(task_json), trial, dataset)
        return rec.model_dump_json()


def worker_recipe(recipe: BackendRecipe, cpus_per_worker: float) -> BackendRecipe:
    """An embedded model gets the worker's CPUs as threads (llama.cpp would take every core of the
    host in each worker); paths become absolute, since workers may start elsewhere."""
    options = dict(recipe.options)
    if recipe.model.startswith("local:") and options.get("n_threads") is None:
        options["n_threads"] = max(1, int(cpus_per_worker))
    if options.get("cache_dir") is not None:
        options["cache_dir"] = Path(options["cache_dir"]).resolve()
    return BackendRecipe(recipe.model, options)


async def run_dataset_ray(
    ds: Dataset,
    backend: Backend,
    store: Store,
    cfg: RunConfig,
    *,
    recipe: BackendRecipe,
    options: RayOptions | None = None,
    judges: Sequence[Backend] = (),
) -> RunSummary:
    """run_dataset's work on Ray workers: the same plan, keys, claims, records and scores.

    `backend` is the driver's (its model id makes the keys; judges may reuse it, and a local model
    loads in the driver only if it judges); `recipe` builds each worker's own."""
    # the workers' datasets have no held-back key path: the driver names every hidden file for them
    cfg = dataclasses.replace(cfg, hidden=hidden_paths(ds, cfg))
    dispatch = RayDispatch(ds, backend, cfg, recipe, options or RayOptions())
    return await run_dataset(ds, backend, store, cfg, judges=judges, dispatch=dispatch)


class RayDispatch(LocalDispatch):
    """run_dataset's items on Ray workers, `cfg.concurrency` in flight on each; the driver (its agents
    built here only to be checked) claims each item just before it goes out, stores and scores it."""

    def __init__(self, ds: Dataset, backend: Backend, cfg: RunConfig, recipe: BackendRecipe,
                 options: RayOptions) -> None:
        super().__init__(ds, backend, cfg, cfg.hidden)
        # before any work: a missing extra is a one-line error, not a half-done run
        self.recipe, self.options, self.ray = recipe, options, import_ray()
        self.actors: list[Any] = []
        self.free: asyncio.Queue[Any] = asyncio.Queue()  # one entry per item a worker may take on
        self.started = False

    def check(self) -> None:
        for spec in self.cfg.agents:  # in the driver, before any worker starts
            agent = self.agent(spec, 0)
            if reads_key(agent):  # workers never open the key; one call per item needs no cluster
                raise RayError(f"agent {spec}: the oracle reference reads the answer key in the runner; run it with "
                               "--executor local")
            if getattr(agent, "per_user", False):  # a memory agent: one session per user, not per item
                raise RayError(f"--agent {spec}: memory agents run user by user with the local executor; "
                               "run them without --executor ray (docs/memory_systems.md)")

    async def open(self, plan: Plan) -> int:
        if not plan.todo:
            return 1
        self.started = init_ray(self.options.address, self.options.workers)
        self.actors = _start_workers(self.ray, self.ds, self.cfg, self.recipe, self.options, len(plan.todo))
        await _check_workers(self.actors, self.backend.model_id)
        for actor in self.actors:
            for _ in range(max(1, self.cfg.concurrency)):
                self.free.put_nowait(actor)
        return self.free.qsize()

    async def produce(self, item: WorkItem, plan: Plan) -> RunRecord:
        from ray.exceptions import RayActorError

        actor = await self.free.get()
        try:
            rec = RunRecord.model_validate_json(
                await actor.run.remote(item.spec, item.task.model_dump_json(), item.trial, plan.dataset))
        except RayActorError as e:  # its worker died under it on every attempt
            rec = errored_record(item.spec, item.task, dataset=plan.dataset, model=plan.model, trial=item.trial,
                                 cfg=self.cfg, error=f"{type(e).__name__}: the Ray worker died while running this "
                                 f"item ({1 + TASK_RETRIES} attempts): {str(e).splitlines()[0] if str(e) else ''}")
        finally:
            self.free.put_nowait(actor)
        if rec.key != item.key:  # _check_workers makes this impossible; a wrong key would be stored forever
            raise RuntimeError(f"a Ray worker returned key {rec.key} for {item.key}")
        return rec

    async def close(self) -> None:
        for actor in self.actors:
            self.ray.kill(actor)
        if self.started:
            self.ray.shutdown()


def _start_workers(ray: Any, ds: Dataset, cfg: RunConfig, recipe: BackendRecipe, options: RayOptions,
                   items: int) -> list[Any]:
    cpus = max(float(options.cpus_per_worker), 0.0)
    n = options.workers or max(1, int(ray.cluster_resources().get("CPU", 1) // max(cpus, 1.0)))
    n = max(1, min(n, items))  # no idle workers loading a model for nothing
    # workers get absolute paths (they may run elsewhere) and no progress bars of their own
    wcfg = dataclasses.replace(cfg, cache_dir=Path(cfg.cache_dir).resolve(), progress=False)
    actor_cls = ray.remote(num_cpus=cpus, max_restarts=MAX_RESTARTS, max_task_retries=TASK_RETRIES,
                           max_concurrency=max(1, cfg.concurrency))(RayWorker)
    table = registry.snapshot()
    root = str(Path(ds.root).resolve())
    wrecipe = worker_recipe(recipe, cpus)
    return [actor_cls.remote(root, wrecipe, wcfg, table) for _ in range(n)]


async def _check_workers(actors: list[Any], model_id: str) -> None:
    """A worker that cannot start (no model file on its node, a bad option) stops the run here, with
    Ray's message, instead of erroring every item; and its keys must be the driver's."""
    from ray.exceptions import RayActorError

    try:
        ids = await asyncio.gather(*(a.model_id.remote() for a in actors))
    except RayActorError as e:
        raise RayError(f"a Ray worker could not start (nothing was run): {_cause(e)}") from None
    for got in ids:
        if got != model_id:
            raise RayError(f"a Ray worker built model {got!r} but the driver has {model_id!r}: "
                           "their run keys would differ; give every node the same model string and options")


def _cause(e: BaseException) -> str:
    """The exception at the bottom of Ray's message (its traceback lines are the worker's, not news)."""
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", line) for line in str(e).splitlines()]
    last = max((i for i, line in enumerate(lines) if re.match(r"[A-Za-z_][\w.]*(Error|Exception)\b", line)), default=None)
    return "\n".join(lines[last:]) if last is not None else (lines[0] if lines else type(e).__name__)
