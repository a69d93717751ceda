"""`iba run`: run agents on a dataset, store every action, score inline. Resumable."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sys
from pathlib import Path

from iba.argtypes import positive_float, positive_int
from iba.commands import fail
from iba.commands.model_options import (JUDGES_DEFAULT, JUDGES_HELP, add_backend_arguments, backend_from_args,
                                        backend_options)


def add_arguments(p: argparse.ArgumentParser) -> None:
    from iba.commands.embedder_options import add_embedder_arguments

    p.add_argument("dataset", type=Path,
                   help="dataset directory (from `iba build` or `iba import`), a Hugging Face export of one "
                   "(`iba export hf`), or a Hugging Face hub id written hf:owner/name (downloaded, needs iba[hf])")
    p.add_argument("--answer-key", type=Path, default=None, metavar="PATH",
                   help="the answer key, kept outside the dataset folder (a public release with a hidden test "
                   "split); it is opened only to score an item whose agents have finished, one item at a time. "
                   "distractors.jsonl and persona_states.jsonl beside it are hidden from agents too. With --qa "
                   "the tasks run first, then the probes (which are in the key)")
    p.add_argument("--agent", action="append", dest="agents", metavar="SPEC",
                   help="agent spec, repeatable: direct, rag, iba, iba-fc, external?cmd=..., memory?cmd=..., with options "
                   "as iba?retrieval=false&btda=false&synthesis=rag&reranker=rules (default: rag). Reference rows, "
                   "marked as such in reports and submissions: null (the direct prompt with no history), direct "
                   "(the full-context row: the most recent turns that fit the context window), oracle (only the "
                   "instance's gold evidence turns, which the runner reads from the answer key)")
    add_backend_arguments(p)
    p.add_argument("--store", type=Path, default=Path("runs/iba.sqlite"), help="result store (SQLite; default: runs/iba.sqlite)")
    p.add_argument("--run", default="default", help="run name, to tell runs apart in reports (default: default)")
    p.add_argument("--trials", type=positive_int, default=1, help="repeated agent trials per instance (default: 1)")
    p.add_argument("--seed", type=int, default=42, help="seed (trial t uses seed+t; default 42, as in the paper)")
    p.add_argument("--limit", type=positive_int, default=None, help="run only the first N selected instances")
    p.add_argument("--sample", type=positive_int, default=None, metavar="N",
                   help="run a stratified sample of N of the selected instances: domains balanced, then action kinds, "
                   "users and scenarios as far as the domains allow (docs/references_and_samples.md). Recorded in the store, "
                   "the report and submissions; a store holds one sample per dataset and refuses runs outside it")
    p.add_argument("--sample-seed", type=int, default=0, metavar="S",
                   help="with --sample: the seed of the draw (default 0); the same N, seed and dataset give the "
                   "same instances, and the sample of N is the first N of any larger one")
    p.add_argument("--domain", action="append", dest="domains", help="only this domain id (repeatable)")
    p.add_argument("--scenario", action="append", dest="scenarios", help="only this scenario id (repeatable)")
    p.add_argument("--user", action="append", dest="users", metavar="USER_ID",
                   help="only this user's instances (repeatable), e.g. a few users for a memory agent, which "
                   "ingests each user's whole history once (docs/memory_systems.md)")
    p.add_argument("--concurrency", type=positive_int, default=1,
                   help="instances in flight at once (the embedded model serialises anyway; raise it for servers)")
    p.add_argument("--qa", action="store_true", help="also ask each instance's multiple-choice QA probes (knowledge-to-action gap)")
    p.add_argument("--qa-per-instance", type=positive_int, default=None, help="with --qa: at most N probes per instance")
    p.add_argument("--judges", default=JUDGES_DEFAULT, help=JUDGES_HELP)
    p.add_argument("--retry-errored", action="store_true",
                   help="run again the selected instances whose stored record is errored (e.g. after a timeout)")
    p.add_argument("--judge-repeats", type=positive_int, default=1, help="repeated judging per checkpoint (default: 1)")
    p.add_argument("--no-score", action="store_true", help="store actions only; score later with `iba score`")
    p.add_argument("--timeout", type=positive_float, default=900.0, help="seconds per agent action before it is errored")
    add_embedder_arguments(p)
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--batch", type=Path, default=None, metavar="DIR",
                   help="call no model: write every pending call (agent steps and judges) as OpenAI Batch API "
                   "request files in DIR (a new round each run), replay the answers already there, and exit 3 "
                   "while calls await answers. Send a round with `iba batch submit DIR` and fetch it with `iba "
                   "batch collect DIR`, or answer it offline (`iba batch answer DIR --model M`, `iba batch "
                   "import DIR FILE`); then rerun this command. Done when it exits 0 (docs: README, Use with)")
    p.add_argument("--executor", choices=("local", "ray"), default="local",
                   help="local: agents run in this process (default); ray: on Ray workers, each with its own "
                   "backend and index cache, results stored by this process (needs iba[ray]; docs/scaling.md)")
    p.add_argument("--ray-address", default=None, metavar="ADDRESS",
                   help="with --executor ray: the cluster to join (e.g. ray://head:10001 or auto; default: "
                   "$RAY_ADDRESS, else a new local cluster on 127.0.0.1)")
    p.add_argument("--workers", type=positive_int, default=None, metavar="N",
                   help="with --executor ray: Ray workers (default: one per CPU of the cluster); --concurrency "
                   "is then per worker")


def resolve_judge_names(spec: str, run_model: str) -> list[str]:
    """--judges as model strings: 'same' is `run_model`, 'best' the strongest installed packaged
    model (ValueError when none is), 'none' nothing."""
    from iba.llm.models import strongest_installed_judge

    out = []
    for name in filter(None, (s.strip() for s in spec.split(","))):
        if name == "none":
            continue
        if name == "best":
            best = strongest_installed_judge()
            if best is None:
                raise ValueError("argument --judges: 'best' names no model: no packaged judge model is installed "
                                 "(`make install`); give --judges MODEL")
            name = best
        out.append(run_model if name == "same" else name)
    return list(dict.fromkeys(out))


def judge_backends(spec: str, run_backend, args, *, sends: bool = True) -> list:
    """Resolve --judges; the run's own backend object is reused rather than loaded twice."""
    names = resolve_judge_names(spec, run_backend.model_id)
    if not names:
        return []
    # with --judge-base-url even the run's own (server) model judges on those servers
    separate = bool(getattr(args, "judge_base_url", None)) and run_backend.model_id.startswith("openai:")
    extra = {} if sends else {"sends": False}
    return [run_backend if name == run_backend.model_id and not separate
            else backend_from_args(name, args, judge=True, **extra) for name in names]


def check_embedder(args: argparse.Namespace) -> str | None:
    """An unknown --embedder, or an openai: one that cannot be set up, would fail inside every retrieving
    agent's act; said here instead. Sets args.embedder to the spec with its server settings."""
    from iba.commands.embedder_options import embedder_from_args

    try:
        args.embedder = embedder_from_args(args)
    except (ValueError, RuntimeError) as e:
        return str(e)
    return None


def check_executor(args: argparse.Namespace) -> str | None:
    """Ray options without Ray, or Ray missing: said before any model loads."""
    executor = getattr(args, "executor", "local")
    if executor != "ray":
        for flag, value in (("--ray-address", getattr(args, "ray_address", None)), ("--workers", getattr(args, "workers", None))):
            if value is not None:
                return f"argument {flag}: only with --executor ray"
        return None
    from iba.run.ray_executor import RayError, import_ray

    try:
        import_ray()
    except RayError as e:
        return str(e)
    return None


def main(args: argparse.Namespace) -> int:
    from iba.agents.base import AgentEnv
    from iba.dataset import Dataset, DatasetError
    from iba.hf import HFError
    from iba.hf.load import dataset_dir
    from iba.agents.references import reference_of
    from iba.run.runner import make_agent, run_dataset
    from iba.run.sample import SampleError
    from iba.run.selection import Selection
    from iba.run.store import Store

    if args.answer_key is not None and not args.answer_key.is_file():
        return fail(f"argument --answer-key: {args.answer_key}: no such file")
    try:
        # a Hugging Face export or hub id is read back into an IBA folder under --cache-dir
        args.dataset = dataset_dir(args.dataset, args.cache_dir)
        ds = Dataset(args.dataset, answer_key=args.answer_key)
        ds.instances  # validate early: a bad line is reported with file and line
    except (DatasetError, HFError) as e:
        return fail(e)
    # an unknown --domain/--scenario/--user (a typo) would otherwise run 0 instances
    typo = Selection(domains=args.domains, scenarios=args.scenarios, users=args.users).problem(
        ds, ("--domain", "--scenario", "--user"))
    problem = (f"argument {typo}" if typo else None) or check_embedder(args) or check_executor(args)
    if problem:
        return fail(problem)
    if args.sample is not None and args.limit is not None:
        return fail("argument --limit: not with --sample (the sample of N is the first N of a larger sample: "
                    "give the smaller N)")
    if args.sample_seed != 0 and args.sample is None:
        return fail("argument --sample-seed: only with --sample N")
    if args.batch is not None and args.executor == "ray":
        return fail("argument --batch: not with --executor ray (batch rounds replay in this process)")
    try:
        # --batch calls no model: a server backend is built for its name and token counts, no key needed
        sends = {} if args.batch is None else {"sends": False}
        backend = backend_from_args(args.model, args, **sends)
        judges = judge_backends(args.judges, backend, args, **sends)
        folder = None
        if args.batch is not None:
            backend, judges, folder = batch_backends(args.batch, backend, judges)
    except (ValueError, FileNotFoundError, RuntimeError) as e:
        return fail(e)
    # every agent spec is built once here (constructors only parse options; the model loads on
    # first use), so a bad name or option stops the run before any work, with its message
    for spec in args.agents or ["rag"]:
        try:
            make_agent(spec, AgentEnv(backend=backend, cache_dir=args.cache_dir, embedder=args.embedder),
                       ds.hidden_paths)
        except KeyError as e:  # unknown agent name: the registry lists the known ones
            return fail(f"argument --agent: {e.args[0]}")
        except ValueError as e:
            return fail(f"argument --agent: {e}")
    cfg = run_config(args, judged=bool(judges))
    selected = cfg.task(ds).instances()
    if not selected:
        where = f"{args.dataset / 'instances.jsonl'} has no instances" if not ds.instances else \
            "no instance matches --domain, --scenario and --user together"
        return fail(f"nothing to run: {where}")
    try:
        # before any agent runs: histories readable and valid, users/scenarios known, answer key
        # complete; otherwise a broken file surfaces mid-run after hours of model calls. A
        # held-back key is not opened before an item's agents have finished: it is checked as read.
        oracle = any(reference_of(spec) == "oracle" for spec in cfg.agents)  # reads the key before acting
        ds.check(selected, answer_key=(cfg.score or cfg.qa or oracle) and not ds.held_back)
    except DatasetError as e:
        return fail(e)
    # a held-back key is opened for an item only once its agents have finished, and the QA probes
    # are in it: the tasks run first, then the probes of the items whose tasks are stored
    passes = [dataclasses.replace(cfg, qa=False), cfg] if ds.held_back and cfg.qa else [cfg]
    # a store that cannot be opened is a StoreError: iba.cli says so in one line (exit 2)
    with Store(args.store) as store:
        # the user's to fix: a message, not a traceback
        stops: tuple[type[Exception], ...] = (DatasetError, SampleError)
        for n, pass_cfg in enumerate(passes):
            if args.executor == "ray":
                from iba.run.ray_executor import BackendRecipe, RayError, RayOptions, run_dataset_ray

                stops += (RayError,)  # no cluster at --ray-address, a worker that cannot start
                work = run_dataset_ray(ds, backend, store, pass_cfg, judges=judges,
                                       recipe=BackendRecipe(args.model, backend_options(args)),
                                       options=RayOptions(address=args.ray_address, workers=args.workers))
            else:
                work = run_dataset(ds, backend, store, pass_cfg, judges=judges)
            try:
                summary = asyncio.run(work)
            except stops as e:  # e.g. a file changed under the run after the check
                return fail(e)
            if n < len(passes) - 1:
                print(f"tasks: {summary.ok} ok, {summary.failed} failed, {summary.errored} errored; now the QA "
                      "probes (in the held-back key) of the items whose tasks are stored")
    print(
        f"{summary.planned} planned, {summary.skipped} already stored, "
        + (f"{summary.retried} errored records retried, " if summary.retried else "")
        + (f"{summary.rescored} stored records scored, " if summary.rescored else "")
        + (f"{summary.elsewhere} run by another process on this store, " if summary.elsewhere else "")
        + f"{summary.ok} ok, {summary.failed} failed (scored 0), {summary.errored} errored"
        + (f", {summary.deferred} waiting for batch answers" if folder is not None else "") + " "
        f"in {summary.wall_s:.1f}s; {summary.usage.llm_calls} LLM calls, "
        f"{summary.usage.prompt_tokens} prompt + {summary.usage.completion_tokens} completion tokens"
    )
    if summary.ingests:
        u = summary.ingest_usage
        print(f"memory: {summary.ingests} user history(ies) ingested; the memories reported {u.llm_calls} LLM calls, "
              f"{u.prompt_tokens} prompt + {u.completion_tokens} completion tokens for ingesting (not in the figures "
              "above, which are the acts')")
    for line in summary.notes + reference_lines(cfg.agents):
        print(line)
    for line in summary.errors[:5]:
        print(f"  {line}", file=sys.stderr)
    status = debt_status(summary)
    if folder is not None:
        status = batch_round(folder, summary, status)
    key_arg = f" --answer-key {args.answer_key}" if args.answer_key else ""
    print(f"store: {args.store}  ->  iba report {args.store} --dataset {args.dataset}{key_arg} --out report/")
    print_overall(args, ds, cfg, selected, backend.model_id, judges)
    return status


def run_config(args: argparse.Namespace, *, judged: bool = True):
    """The RunConfig of `iba run`'s arguments; its Task (RunConfig.task) is the one the inspect task
    builds from the same arguments."""
    from iba.run.runner import RunConfig
    from iba.run.task import task_scorers

    return RunConfig(
        agents=args.agents or ["rag"], run=args.run, trials=args.trials, seed=args.seed,
        concurrency=args.concurrency, limit=args.limit, domains=args.domains, scenarios=args.scenarios,
        users=args.users,
        qa=args.qa, qa_per_instance=args.qa_per_instance, score=not args.no_score,
        judge_repeats=args.judge_repeats, timeout_s=args.timeout, retry_errored=args.retry_errored,
        cache_dir=args.cache_dir, embedder=args.embedder, progress=not args.quiet,
        sample=args.sample, sample_seed=args.sample_seed,
        scorers=task_scorers(judged=judged),
    )


def print_overall(args: argparse.Namespace, ds, cfg, selected: list, model: str, judges: list) -> None:
    """The run's last lines: each agent's overall score on the same instances of this selection,
    with its interval and failed/errored/unscored counts (the report's rule, iba.report.overall)."""
    from iba.dataset import dataset_id
    from iba.report.overall import run_overall
    from iba.run.runner import run_key

    did = dataset_id(ds)
    keys = {run_key(did, t.instance_id, spec, model, trial) for spec in cfg.agents for t in selected
            for trial in range(cfg.trials)}
    for line in run_overall(args.store, cfg.run, keys, [j.model_id for j in judges] or None):
        print(line)


def reference_lines(specs: list[str]) -> list[str]:
    """What `iba run` prints about the agents that are reference rows, apart from the systems."""
    from iba.agents.references import REFERENCES, reference_of

    refs = [s for s in specs if reference_of(s)]
    if not refs:
        return []
    systems = [s for s in specs if not reference_of(s)]
    return ([f"systems: {', '.join(systems)}"] if systems else []) + [
        "references (not systems; marked as such in reports and submissions): "
        + ", ".join(f"{s} [{REFERENCES[reference_of(s)]}]" for s in refs)]


def batch_backends(root: Path, backend, judges: list):
    """The run's backend and judges answered from batch folder `root` (made if new); the same judge
    object as the run's backend stays one object."""
    from iba.batch.backend import BatchBackend
    from iba.batch.folder import BatchFolder

    folder = BatchFolder(root, create=True)
    wrapped = {id(backend): BatchBackend(backend, folder)}
    for j in judges:
        wrapped.setdefault(id(j), BatchBackend(j, folder))
    return wrapped[id(backend)], [wrapped[id(j)] for j in judges], folder


def batch_round(folder, summary, status: int) -> int:
    """Write this run's new requests as the next round and say what to do next: 3 while calls
    await answers, else the run's own status."""
    round_dir, written, waiting = folder.flush()
    if round_dir is not None:
        files = ", ".join(str(f) for f in folder.request_files(round_dir))
        print(f"batch: {written} request(s) written to {files}" + (f"; {waiting} more await an earlier round" if waiting else ""))
    elif waiting:
        print(f"batch: no new requests; {waiting} await their answers in {folder.root} (`iba batch status {folder.root}`)")
    if summary.deferred:
        print(f"batch: {summary.deferred} item(s) wait for answers. Next: `iba batch submit {folder.root}` then "
              f"`iba batch collect {folder.root}` (or `iba batch answer {folder.root} --model M` / `iba batch import "
              f"{folder.root} RESULTS.jsonl`), then rerun this command", file=sys.stderr)
        return 3
    print(f"batch: every call of this selection is answered ({folder.root})")
    return status


def debt_status(summary) -> int:
    """1 (and why, on stderr) while the selection holds errored records or errored judge calls,
    whether this run stored them or an earlier one did; else 0. A rerun must not report success
    over records it skipped as "already stored"."""
    status = 0
    if summary.errored_total:
        before = summary.errored_total - summary.errored
        print(f"{summary.errored_total} record(s) of this selection are errored (infrastructure faults, unscored; "
              f"{summary.errored} stored by this run, {before} before it); rerun with --retry-errored to run "
              "them again", file=sys.stderr)
        status = 1
    if summary.judge_errored:
        print(f"{summary.judge_errored} score record(s) of this selection have judge calls that failed "
              "(infrastructure faults, unscored); rerun the same command, or `iba score`, to judge them again",
              file=sys.stderr)
        status = 1
    return status
