"""`iba score`: (re)score stored runs with judges, verifiers, slot matching and QA parsing.

Only (run, scorer, repeat) triples missing from the store are computed, so adding a judge or
more repeats never re-runs agents and an interrupted scoring resumes where it stopped. Triples
whose judge call failed (an infrastructure fault) are judged again; `--rescore` computes every one
again on purpose (a new judge prompt, a fixed server). Exit 1 while judge faults remain.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections import Counter, defaultdict
from pathlib import Path

from iba.argtypes import nonnegative_float, positive_int
from iba.commands import fail
from iba.commands.model_options import JUDGES_DEFAULT, JUDGES_HELP, add_backend_arguments


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("store", type=Path, help="result store written by `iba run` (SQLite)")
    p.add_argument("--dataset", action="append", type=Path, required=True, dest="datasets", metavar="DIR",
                   help="dataset the runs were made on (repeatable): a folder, an `iba export hf` folder or "
                   "hf:owner/name, as `iba run` takes it; its answer key is read here")
    p.add_argument("--answer-key", action="append", type=Path, default=None, dest="answer_keys", metavar="PATH",
                   help="a held-back answer key (as `iba run --answer-key`), one per --dataset in the same order")
    p.add_argument("--run", action="append", dest="runs", metavar="NAME", help="only this run name (repeatable; default: all)")
    p.add_argument("--rescore", action="store_true",
                   help="compute every score of the selected runs again (the --judges given, verifiers, slots, QA) and "
                   "replace the stored ones: after a judge prompt changed or to judge again on purpose")
    p.add_argument("--judges", default=JUDGES_DEFAULT,
                   help=JUDGES_HELP + "; here 'same' is each stored run's own model, so a store of several models "
                   "has each judged by itself, as `iba run` judged it")
    p.add_argument("--judge-repeats", type=positive_int, default=1, help="repeated judging per checkpoint, seed+r each (default: 1)")
    p.add_argument("--judge-temperature", type=nonnegative_float, default=None,
                   help="judge sampling temperature (default: 0 for one repeat, 0.7 for several)")
    p.add_argument("--judge-batch", action="store_true",
                   help="judge all checkpoints of a response in one call (cheaper; the paper uses one call each)")
    p.add_argument("--seed", type=int, default=42, help="judge seed of repeat 0 (default: 42)")
    p.add_argument("--concurrency", type=positive_int, default=4, help="judge calls in flight (default: 4)")
    add_backend_arguments(p, model=False)  # the judges are --judges; every --base-url serves them
    p.add_argument("--quiet", action="store_true", help="no progress bar")


async def score_store(store, records, keys, *, judges, cfg, concurrency: int, progress: bool,
                      rescore: bool = False) -> Counter:
    """Score every record; returns a Counter of new ScoreRecords by scorer (plus '<scorer>:unscored'
    and '<scorer>:errored'). `judges`: the judge backends of every record, or a mapping from a
    record's model to its judges (`--judges same`)."""
    from tqdm.auto import tqdm

    from iba.eval.scoring import api_template_for, score_record

    counts: Counter = Counter()
    sem = asyncio.Semaphore(max(1, concurrency))
    bar = tqdm(total=len(records), desc="score", unit="run", disable=not progress)

    async def one(rec) -> None:
        key = keys[(rec.dataset, rec.instance_id)]
        api = api_template_for(rec, key)
        # one semaphore for all records bounds the judge calls in flight across the whole store
        mine = judges.get(rec.model, []) if isinstance(judges, dict) else judges
        new = await score_record(rec, key, judges=mine, judge_repeats=cfg.repeats, api_template=api,
                                 store=store, panel=cfg, semaphore=sem, rescore=rescore)
        for s in new:
            counts[s.scorer] += 1
            if s.errored:
                counts[f"{s.scorer}:errored"] += 1
            elif s.score is None:
                counts[f"{s.scorer}:unscored"] += 1
        bar.update(1)

    try:
        await asyncio.gather(*(one(r) for r in records))
    finally:
        bar.close()
    return counts


def dataset_keys(datasets: list[Path], answer_keys: list[Path] | None, cache_dir: Path = Path(".iba-cache")) -> dict:
    """(dataset id, instance id) -> AnswerKey over every --dataset, each with its --answer-key if
    given (paired in order). DatasetError for a bad file; ValueError for unpaired options."""
    from iba.dataset import dataset_id

    if answer_keys is not None and len(answer_keys) != len(datasets):
        raise ValueError(f"argument --answer-key: give one per --dataset, in the same order "
                         f"({len(answer_keys)} for {len(datasets)})")
    from iba.hf.load import open_dataset

    keys = {}
    for i, d in enumerate(datasets):
        ds = open_dataset(d, cache_dir, answer_key=answer_keys[i] if answer_keys else None)
        did = dataset_id(ds)
        keys.update({(did, iid): k for iid, k in ds.answer_keys().items()})
    return keys


def main(args: argparse.Namespace) -> int:
    from iba.dataset import DatasetError
    from iba.eval.aggregate import instance_score, mean, task_kind
    from iba.eval.panel import PanelConfig
    from iba.commands.model_options import backend_from_args
    from iba.commands.run import resolve_judge_names
    from iba.run.store import Store

    if not args.store.exists():
        return fail(f"no store at {args.store}; run `iba run` first")
    try:
        keys = dataset_keys(args.datasets, args.answer_keys, args.cache_dir)
    except (DatasetError, ValueError) as e:
        return fail(e)
    # a store that cannot be opened is a StoreError: iba.cli says so in one line (exit 2)
    with Store(args.store) as store:
        known = store.run_names()
        unknown = [r for r in args.runs or [] if r not in known]
        names = args.runs or known
        records = [r for n in names for r in store.runs(n)]
    if unknown:
        return fail(f"argument --run: no run named {', '.join(unknown)} in {args.store} "
                    f"(runs: {', '.join(known) or 'none'})")
    usable = [r for r in records if (r.dataset, r.instance_id) in keys]
    skipped = len(records) - len(usable)
    if not usable:
        why = (f"{args.store} holds no runs" if not records else
               f"none of its {len(records)} runs were made on the --dataset given")
        return fail(f"nothing to score: {why}")
    try:
        # one judge rule with `iba run` (JUDGES_HELP): 'same' is each record's own model
        names = {m: resolve_judge_names(args.judges, m) for m in sorted({r.model for r in usable})}
        backends = {n: backend_from_args(n, args, judge=True)  # every --base-url is a judge server here
                    for n in dict.fromkeys(n for ns in names.values() for n in ns)}
    except (ValueError, FileNotFoundError, RuntimeError) as e:
        return fail(e)
    judges = {m: [backends[n] for n in ns] for m, ns in names.items()}
    shown = sorted({n for ns in names.values() for n in ns})
    print(f"judges: {', '.join(shown) or 'none'} (--judges {args.judges})", file=sys.stderr)
    cfg = PanelConfig(repeats=args.judge_repeats, seed=args.seed, temperature=args.judge_temperature,
                      batch=args.judge_batch)
    with Store(args.store) as store:
        counts = asyncio.run(score_store(store, usable, keys, judges=judges, cfg=cfg, concurrency=args.concurrency,
                                         progress=not args.quiet, rescore=args.rescore))
        scores = defaultdict(list)
        for s in store.scores():
            scores[s.run_key].append(s)
        _, faults = store.count_errored([r.key for r in usable])
    new = sum(v for k, v in counts.items() if not k.endswith((":unscored", ":errored")))
    print(f"{len(usable)} stored runs in {', '.join(names) or '(none)'}; "
          f"{new} {'recomputed' if args.rescore else 'new'} score records")
    for scorer in sorted(k for k in counts if not k.endswith((":unscored", ":errored"))):
        errored = f", {counts[scorer + ':errored']} errored" if counts[scorer + ":errored"] else ""
        print(f"  {scorer}: {counts[scorer]} new, {counts[scorer + ':unscored']} unscored{errored}")
    if skipped:
        print(f"  {skipped} runs skipped: their dataset was not given with --dataset", file=sys.stderr)
    by_agent: dict[tuple[str, str], list] = defaultdict(list)
    for r in usable:
        if r.probe is None:
            key = keys[(r.dataset, r.instance_id)]
            recs = scores.get(r.key, [])
            judge_ids = [b.model_id for b in judges.get(r.model, [])] or None
            by_agent[(r.agent, r.model)].append(instance_score(task_kind(recs, key), recs, judge_ids))
    for (agent, model), vals in sorted(by_agent.items()):
        m = mean(vals)
        shown = "unscored" if m is None else f"{100 * m:.1f}"
        print(f"  {agent} ({model}): {shown} over {sum(v is not None for v in vals)} scored of {len(vals)} instances")
    if faults:
        print(f"{faults} score record(s) have judge calls that failed (infrastructure faults, unscored); "
              "rerun `iba score` once the judge's server answers to judge them again", file=sys.stderr)
        return 1
    return 0
