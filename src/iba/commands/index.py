"""`iba index DATASET`: embed the users' histories into the retrieval index cache ahead of a run.

It writes exactly the entries the agents would (HistoryIndex.ensure_cached: the same key, file and
lock as HistoryIndex.build), so a later `iba run` with the same --cache-dir, --embedder and
chunking embeds no history. Histories are independent, so they are built in parallel: a process
pool (--processes) or Ray tasks (--executor ray); the cache's atomic writes and per-key locks let
any number of builders, and runs, share one cache directory.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from iba import registry
from iba.argtypes import nonnegative_int, positive_int  # the same option checks as `iba run`
from iba.commands import fail

# BLAS and embedder thread variables: a pool of P processes on C cores gets C // P threads each, not C each
_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "IBA_EMBED_THREADS")


def add_arguments(p: argparse.ArgumentParser) -> None:
    from iba.commands.embedder_options import add_embedder_arguments

    p.add_argument("dataset", type=Path, help="dataset directory (from `iba build` or `iba import`)")
    p.add_argument("--users", type=positive_int, default=None, metavar="N",
                   help="only N users drawn with --seed (the sample `iba eval-retrieval --users N` takes; "
                   "default: every user with an instance)")
    p.add_argument("--seed", type=int, default=42, help="seed for --users (default 42)")
    p.add_argument("--processes", type=positive_int, default=1, metavar="P",
                   help="histories embedded at once, one process each (default 1: in this process)")
    p.add_argument("--cache-dir", type=Path, default=Path(".iba-cache"),
                   help="the cache `iba run --cache-dir` reads (default: .iba-cache); indexes go to CACHE/index")
    p.add_argument("--unit", choices=("token", "turn", "session", "mixed"), default="mixed",
                   help="retrieval unit, as the agents' unit= option (default: mixed, the iba agent's; it also "
                        "caches the token windows that rag and direct's defaults read)")
    p.add_argument("--size", type=positive_int, default=None,
                   help="tokens per chunk, as the agents' size= option (default 256)")
    p.add_argument("--overlap", type=nonnegative_int, default=None, help="token overlap, as the agents' overlap= option (default 50)")
    p.add_argument("--executor", choices=("local", "ray"), default="local",
                   help="ray: one Ray task per history instead of the process pool (needs iba[ray])")
    p.add_argument("--ray-address", default=None, metavar="ADDRESS",
                   help="with --executor ray: the cluster to join (default: $RAY_ADDRESS, else a local one)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_embedder_arguments(p)  # the run's --embedder (and its servers)


def build_one(root: str, user_id: str, embedder: str, cache_dir: str, unit: str, size: int, overlap: int,
              table: dict | None = None) -> tuple[str, int, str, int | None, float]:
    """One user's index into the cache: (user, turns, key, chunks embedded or None if cached, seconds).
    Runs in a pool process or a Ray task: it reads the history itself (paths, not turns, travel)."""
    from iba.dataset import Dataset
    from iba.retrieval.index import HistoryIndex

    if table:
        registry.restore(table)
    t0 = time.perf_counter()
    history = Dataset(root).history(user_id)
    key, chunks = HistoryIndex.ensure_cached(history, embedder, cache_dir, unit=unit, size=size, overlap=overlap)  # type: ignore[arg-type]
    return user_id, len(history), key, chunks, time.perf_counter() - t0


def _init_process(threads: int, table: dict) -> None:
    # before numpy loads in this fresh (spawned) process, so its BLAS starts with this many threads
    for var in _THREAD_VARS:
        os.environ.setdefault(var, str(threads))
    registry.restore(table)


def _count_lines(path: Path) -> int:
    """Turns of a history file without parsing it (for the progress bar's total)."""
    with open(path, "rb") as f:
        return sum(1 for line in f if line.strip())


def main(args: argparse.Namespace) -> int:
    from tqdm.auto import tqdm

    from iba.commands.embedder_options import embedder_from_args, is_remote
    from iba.dataset import Dataset, DatasetError
    from iba.llm.base import LLMError
    from iba.retrieval.chunking import CHUNK_OVERLAP, CHUNK_TOKENS
    from iba.retrieval.embed import get_embedder
    from iba.retrieval.evaluate import sample_users

    try:
        ds = Dataset(args.dataset)
        instances = ds.instances
    except DatasetError as e:
        return fail(e)
    try:
        args.embedder = embedder_from_args(args)
    except (ValueError, RuntimeError) as e:
        return fail(e)
    if args.executor != "ray" and args.ray_address:
        return fail("argument --ray-address: only with --executor ray")
    if args.users:
        instances = sample_users(list(instances), args.users, args.seed)
    users = list(dict.fromkeys(t.user_id for t in instances))
    try:
        sizes = {u: _count_lines(ds.history_path(u)) for u in users}
    except OSError as e:
        return fail(f"cannot read a history: {e}")
    # the longest first: the last history to finish is then a short one, and the workers end together
    users.sort(key=lambda u: -sizes[u])
    size = args.size or CHUNK_TOKENS
    overlap = CHUNK_OVERLAP if args.overlap is None else args.overlap
    jobs = [(str(Path(ds.root).resolve()), u, args.embedder, str(Path(args.cache_dir).resolve()), args.unit, size, overlap)
            for u in users]

    if is_remote(args.embedder):
        try:  # one request: a server that is down or serves no such model is said now, not per history
            dim = get_embedder(args.embedder).dim
        except LLMError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        if not args.quiet:
            print(f"{args.embedder}: {dim} dimensions, from {len(get_embedder(args.embedder).endpoints)} endpoint(s)",
                  file=sys.stderr)
    bar = tqdm(total=sum(sizes.values()), unit="turn", desc="index", disable=args.quiet)
    built = cached = chunks = turns_built = 0
    start = time.perf_counter()
    try:
        for user, turns, _key, made, _secs in _results(args, jobs):
            if made is None:
                cached += 1
            else:
                built += 1
                chunks += made
                turns_built += turns
            bar.update(sizes[user])
            bar.set_postfix(built=built, cached=cached)
    except LLMError as e:  # an embeddings server that failed after its retries and failover
        bar.close()
        print(f"error: {e}\n{built} histories embedded before it are in the cache; rerun the same command to go on",
              file=sys.stderr)
        return 1
    except (DatasetError, RuntimeError) as e:  # a bad history; an embedder that cannot load says what to install
        bar.close()
        return fail(e)
    bar.close()
    wall = time.perf_counter() - start
    where = "Ray" if args.executor == "ray" else f"{args.processes} process{'es' if args.processes > 1 else ''}"
    rate = f"{turns_built / wall:.1f} turns/s" if turns_built and wall > 0 else "nothing to embed"
    print(f"{len(users)} histories ({sum(sizes.values())} turns): {built} embedded ({turns_built} turns, {chunks} "
          f"{args.unit} units), {cached} already in the cache; {wall:.1f}s, {rate} with {where}, "
          f"embedder {args.embedder}; cache: {Path(args.cache_dir) / 'index'}")
    return 0


def _results(args: argparse.Namespace, jobs: list[tuple]):
    """build_one's results as they finish, in this process, a process pool, or Ray tasks."""
    if args.executor == "ray":
        yield from _ray_results(args, jobs)
        return
    if args.processes == 1 or len(jobs) <= 1:
        for job in jobs:
            yield build_one(*job)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    procs = min(args.processes, len(jobs))
    threads = max(1, (os.cpu_count() or 1) // procs)
    # spawn, not fork: a forked child would inherit this process's BLAS and tokenizer threads' state
    with ProcessPoolExecutor(procs, mp_context=multiprocessing.get_context("spawn"),
                             initializer=_init_process, initargs=(threads, registry.snapshot())) as pool:
        futures = [pool.submit(build_one, *job) for job in jobs]
        try:
            for fut in as_completed(futures):
                yield fut.result()
        except BaseException:
            for fut in futures:
                fut.cancel()
            raise


def _ray_results(args: argparse.Namespace, jobs: list[tuple]):
    from iba.run.ray_executor import RayError, import_ray, init_ray

    try:
        ray = import_ray()
        started = init_ray(args.ray_address)
    except RayError as e:
        raise RuntimeError(str(e)) from None
    try:
        task = ray.remote(num_cpus=1)(build_one)
        table = registry.snapshot()
        pending = [task.remote(*job, table) for job in jobs]
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            yield ray.get(done[0])
    finally:
        if started:
            ray.shutdown()
