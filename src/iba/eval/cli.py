"""`iba score`: (re)score stored runs with judges, verifiers, slot matching and QA parsing.

Only (run, scorer, repeat) triples missing from the store are computed, so adding a judge or
more repeats never re-runs agents and an interrupted scoring resumes where it stopped.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections import Counter, defaultdict
from pathlib import Path


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("store", type=Path, help="result store written by `iba run` (SQLite)")
    p.add_argument("--dataset", action="append", type=Path, required=True, dest="datasets", metavar="DIR",
                   help="dataset directory the runs were made on (repeatable); its answer key is read here")
    p.add_argument("--run", action="append", dest="runs", metavar="NAME", help="only this run name (repeatable; default: all)")
    p.add_argument("--judges", default="best",
                   help="comma-separated judge model strings for Generate(text) checkpoints; 'best' (default) = the "
                   "strongest packaged model installed (local:qwen2.5-coder-1.5b, else the 0.5B). Neither is a reliable "
                   "judge (`iba judge-check`: the 1.5B fails most compliant responses, the 0.5B passes most violations); "
                   "judge on a real server for figures you report); 'none' = verifiers, slots and QA only")
    p.add_argument("--judge-repeats", type=int, default=1, help="repeated judging per checkpoint, seed+r each (default: 1)")
    p.add_argument("--judge-temperature", type=float, default=None,
                   help="judge sampling temperature (default: 0 for one repeat, 0.7 for several)")
    p.add_argument("--judge-batch", action="store_true",
                   help="judge all checkpoints of a response in one call (cheaper; the paper uses one call each)")
    p.add_argument("--seed", type=int, default=42, help="judge seed of repeat 0 (default: 42)")
    p.add_argument("--concurrency", type=int, default=4, help="judge calls in flight (default: 4)")
    p.add_argument("--base-url", action="append", default=None, metavar="URL",
                   help="server URL for openai: judges (default: $OPENAI_BASE_URL); repeat it for replicas of the "
                   "judge model: calls go to the least busy one, a failing one is avoided (docs/scaling.md)")
    p.add_argument("--no-cache", action="store_true", help="do not read or write the LLM response cache")
    p.add_argument("--cache-dir", type=Path, default=Path(".iba-cache"), help="LLM response cache (default: .iba-cache)")
    p.add_argument("--call-timeout", type=float, default=600.0, help="seconds one judge call may take (default 600)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def api_template(scenario: str):
    """The scenario's ApiTemplate from the shipped taxonomy (its synonyms matter for matching);
    None for scenarios it does not know (imported datasets: exact matching, no schema check)."""
    from iba.taxonomy import load_taxonomy

    try:
        return load_taxonomy().scenario(scenario).api
    except KeyError:
        return None


async def score_store(store, records, keys, *, judges, cfg, concurrency: int, progress: bool) -> Counter:
    """Score every record; returns a Counter of new ScoreRecords by scorer (plus '<scorer>:unscored')."""
    from tqdm.auto import tqdm

    from iba.eval.qa import split_qa_id
    from iba.eval.scoring import record_kind, score_record

    counts: Counter = Counter()
    sem = asyncio.Semaphore(max(1, concurrency))
    bar = tqdm(total=len(records), desc="score", unit="run", disable=not progress)
    templates: dict[str, object] = {}

    async def one(rec) -> None:
        key = keys[(rec.dataset, split_qa_id(rec.instance_id)[0])]
        if rec.scenario not in templates:
            templates[rec.scenario] = api_template(rec.scenario) if key.slots else None
        api = templates[rec.scenario] if record_kind(rec, key) != "qa" else None
        # one semaphore for all records bounds the judge calls in flight across the whole store
        new = await score_record(rec, key, judges=judges, judge_repeats=cfg.repeats, api_template=api,
                                 store=store, panel=cfg, semaphore=sem)
        for s in new:
            counts[s.scorer] += 1
            if s.score is None:
                counts[f"{s.scorer}:unscored"] += 1
        bar.update(1)

    try:
        await asyncio.gather(*(one(r) for r in records))
    finally:
        bar.close()
    return counts


def main(args: argparse.Namespace) -> int:
    from iba.dataset import Dataset, DatasetError
    from iba.eval.aggregate import instance_score, mean, task_kind
    from iba.eval.panel import PanelConfig
    from iba.eval.qa import split_qa_id
    from iba.run.run_cmd import backend_from_args
    from iba.run.runner import dataset_id
    from iba.run.store import Store

    if not args.store.exists():
        print(f"error: no store at {args.store}; run `iba run` first", file=sys.stderr)
        return 2
    keys = {}
    try:
        for d in args.datasets:
            ds = Dataset(d)
            did = dataset_id(ds)
            keys.update({(did, iid): k for iid, k in ds.answer_keys().items()})
    except DatasetError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.judges == "best":
        from iba.llm.models import strongest_installed_judge

        best = strongest_installed_judge()
        if best is None:
            print("error: no packaged judge model is installed; run `make install` or give --judges MODEL",
                  file=sys.stderr)
            return 2
        print(f"judge: {best} (the strongest installed; --judges to choose)", file=sys.stderr)
        args.judges = best
    try:
        judges = [] if args.judges == "none" else [
            backend_from_args(m.strip(), args, judge=True)  # every --base-url is a judge server here
            for m in args.judges.split(",") if m.strip()
        ]
    except (ValueError, FileNotFoundError, RuntimeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    cfg = PanelConfig(repeats=max(1, args.judge_repeats), seed=args.seed, temperature=args.judge_temperature,
                      batch=args.judge_batch)
    with Store(args.store) as store:
        names = args.runs or store.run_names()
        records = [r for n in names for r in store.runs(n)]
        usable = [r for r in records if (r.dataset, split_qa_id(r.instance_id)[0]) in keys]
        skipped = len(records) - len(usable)
        counts = asyncio.run(score_store(store, usable, keys, judges=judges, cfg=cfg,
                                         concurrency=args.concurrency, progress=not args.quiet))
        scores = defaultdict(list)
        for s in store.scores():
            scores[s.run_key].append(s)
    print(f"{len(usable)} stored runs in {', '.join(names) or '(none)'}; "
          f"{sum(v for k, v in counts.items() if not k.endswith(':unscored'))} new score records")
    for scorer in sorted(k for k in counts if not k.endswith(":unscored")):
        print(f"  {scorer}: {counts[scorer]} new, {counts[scorer + ':unscored']} unscored")
    if skipped:
        print(f"  {skipped} runs skipped: their dataset was not given with --dataset", file=sys.stderr)
    judge_ids = [b.model_id for b in judges] or None
    by_agent: dict[tuple[str, str], list] = defaultdict(list)
    for r in usable:
        if split_qa_id(r.instance_id)[1] is None:
            key = keys[(r.dataset, r.instance_id)]
            recs = scores.get(r.key, [])
            by_agent[(r.agent, r.model)].append(instance_score(task_kind(recs, key), recs, judge_ids))
    for (agent, model), vals in sorted(by_agent.items()):
        m = mean(vals)
        shown = "unscored" if m is None else f"{100 * m:.1f}"
        print(f"  {agent} ({model}): {shown} over {sum(v is not None for v in vals)} scored of {len(vals)} instances")
    return 0
