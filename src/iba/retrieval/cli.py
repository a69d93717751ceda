"""`iba eval-retrieval DATASET`: recall@3 / recall@10 of gold evidence for dense top-3, BM25,
hybrid and Deep Retrieval (see iba.retrieval.evaluate for the definitions)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

from iba.argtypes import positive_int

EXPANSIONS = ("template", "llm")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dataset", help="a dataset directory built by `iba build`")
    p.add_argument("--json", action="store_true", help="print exactly one JSON object (method -> recalls)")
    p.add_argument("--limit", type=positive_int, default=None, help="only the first N instances")
    p.add_argument(
        "--users", type=positive_int, default=None,
        help="only the instances of N users drawn with --seed (a spread sample of a large dataset; "
        "each history is embedded once however many of its tasks are evaluated)",
    )
    p.add_argument("--embedder", default="minilm", help="embedder name (minilm, all-mpnet-base-v2, bge-m3)")
    p.add_argument("--unit", choices=("token", "turn", "session", "mixed"), default="token", help="retrieval unit (default: 256-token chunks, 50 overlap)")
    p.add_argument("--k", type=positive_int, default=5, help="passages per query inside Deep Retrieval (default 5; the paper's 3)")
    p.add_argument("--deep-method", choices=("dense", "hybrid"), default="hybrid", help="search of Deep Retrieval's queries (default hybrid; the paper's dense)")
    p.add_argument("--no-feedback", action="store_true", help="Deep Retrieval without the relevance-feedback searches")
    p.add_argument("--no-scan", action="store_true", help="Deep Retrieval without the signal-first cue scan")
    p.add_argument("--slots", action="store_true", help="Deep Retrieval with one query per API choice parameter (off: it did not hold on held-out users)")
    p.add_argument("--no-contrast", action="store_true",
                   help="Deep Retrieval without scenario contrast (relevance moved by how much nearer a passage is to "
                        "the task's scenario name than to the dataset's other scenario names)")
    p.add_argument("--no-repeats", action="store_true", help="Deep Retrieval without history-wide repeat folding "
                   "(with --no-feedback --no-scan --no-contrast --k 3 --deep-method dense: the paper's retrieval)")
    p.add_argument("--expansion", choices=EXPANSIONS, default="template", help="facet queries from templates (default) or an LLM")
    p.add_argument("--model", default=None, help="model for --expansion llm (default: local:qwen2.5-coder-0.5b)")
    p.add_argument("--base-url", default=None, help="server for openai: models")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--cache-dir", default=".iba-cache", help="history index cache (default .iba-cache)")


def main(args: argparse.Namespace) -> int:
    from iba.dataset import Dataset
    from iba.retrieval.evaluate import RecallTable, gold_turns, ranked_lists
    from iba.retrieval.index import HistoryIndex

    ds = Dataset(args.dataset)
    keys = ds.answer_keys()
    instances = list(ds.instances)
    if args.users:
        instances = sample_users(instances, args.users, args.seed)
    if args.limit:
        instances = instances[: args.limit]
    backend = None
    if args.expansion == "llm":
        from iba.llm import DEFAULT_MODEL, resolve_backend

        backend = resolve_backend(args.model or DEFAULT_MODEL, base_url=args.base_url)
    scenarios = ds.scenario_names  # public: the tasks' own names
    table = RecallTable()
    skipped = 0
    start = time.perf_counter()
    for n, task in enumerate(instances, start=1):
        gold = gold_turns(keys[task.instance_id])
        if not gold:
            skipped += 1
            continue
        index = HistoryIndex.build(ds.history(task.user_id), args.embedder, Path(args.cache_dir), unit=args.unit)
        queries = asyncio.run(_llm_queries(backend, task, args.seed)) if backend else None
        table.add(ranked_lists(index, task, queries, deep_k=args.k, deep_method=args.deep_method, feedback=not args.no_feedback,
                               scan=not args.no_scan, repeats=not args.no_repeats, slots=args.slots,
                               scenarios=() if args.no_contrast else scenarios), gold)
        if sys.stderr.isatty():
            print(f"\r{n}/{len(instances)} instances", end="", file=sys.stderr, flush=True)
    if sys.stderr.isatty():
        print(file=sys.stderr)
    summary = table.summary()
    if args.json:
        print(json.dumps(summary))
        return 0
    print(f"dataset {args.dataset} ({ds.name}): {len(instances) - skipped} instances with gold evidence"
          f"{f', {skipped} without' if skipped else ''}; embedder {args.embedder}, unit {args.unit}, "
          f"expansion {args.expansion}; {time.perf_counter() - start:.1f}s")
    print(f"{'method':<12}{'recall@3':>10}{'recall@10':>11}")
    for method, row in summary.items():
        print(f"{method:<12}{row['recall@3']:>10.3f}{row['recall@10']:>11.3f}")
    return 0


def sample_users(instances: list, n: int, seed: int) -> list:
    """The instances of `n` users drawn with `seed`, in dataset order."""
    import random

    users = sorted({t.user_id for t in instances})
    chosen = set(random.Random(seed).sample(users, min(n, len(users))))
    return [t for t in instances if t.user_id in chosen]


async def _llm_queries(backend, task, seed: int):
    from iba.retrieval.llm_expansion import llm_facet_queries

    queries, _ = await llm_facet_queries(backend, task, seed)
    return queries
