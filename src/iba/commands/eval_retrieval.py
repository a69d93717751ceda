"""`iba eval-retrieval DATASET`: recall@3 / recall@10 of gold evidence for dense top-3, BM25,
hybrid and Deep Retrieval (see iba.retrieval.evaluate for the definitions); with `--agent SPEC`,
also the *reach* of each configuration at each `--budget`: the share of checkpoints and of slots
whose gold evidence clause appears whole in the prompt of the step that decides it, the prompts
built by the agents' own code without a model (iba.run.prompt_reach, iba.eval.reach)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

from iba.argtypes import positive_int
from iba.commands import fail
from iba.commands.model_options import add_backend_arguments, backend_from_args

EXPANSIONS = ("template", "llm")
BUDGETS = (1000, 2000, 4000, 8000)


def add_arguments(p: argparse.ArgumentParser) -> None:
    from iba.commands.embedder_options import add_embedder_arguments
    from iba.retrieval.deep import DeepOptions

    d = DeepOptions()
    p.add_argument("dataset", help="a dataset directory built by `iba build` or `iba import`")
    p.add_argument("--json", action="store_true", help="print exactly one JSON object (method -> recalls[, reach])")
    p.add_argument("--limit", type=positive_int, default=None, help="only the first N instances")
    p.add_argument(
        "--users", type=positive_int, default=None,
        help="only the instances of N users drawn with --seed (a spread sample of a large dataset; "
        "each history is embedded once however many of its tasks are evaluated)",
    )
    p.add_argument("--unit", choices=("token", "turn", "session", "mixed"), default="token", help="retrieval unit (default: 256-token chunks, 50 overlap)")
    g = p.add_argument_group("Deep Retrieval (the agents' options of the same names: iba?k=3&method=dense&feedback=false...)")
    g.add_argument("--k", type=positive_int, default=d.k, help=f"passages per query (default {d.k}; the paper's 3)")
    g.add_argument("--method", choices=("dense", "bm25", "hybrid"), default=d.method, help=f"search of the queries (default {d.method}; the paper's dense)")
    g.add_argument("--no-feedback", action="store_true", help="without the relevance-feedback searches (feedback=false)")
    g.add_argument("--no-scan", action="store_true", help="without the signal-first cue scan (scan=false)")
    g.add_argument("--slots", action="store_true", help="one more query per API choice parameter (slots=true)")
    g.add_argument("--values", action="store_true", help="one more query per allowed value of each API choice parameter (values=true)")
    g.add_argument("--contrast", action=argparse.BooleanOptionalAction, default=d.contrast,
                   help="relevance moved by how much nearer a passage is to the task's scenario name than to the "
                        f"dataset's other scenario names (contrast=true; default {'on' if d.contrast else 'off'})")
    g.add_argument("--no-repeats", action="store_true", help="without history-wide repeat folding (repeats=false; "
                   "with --no-feedback --no-scan --no-contrast --k 3 --method dense: the paper's retrieval)")
    g.add_argument("--max-passages", type=positive_int, default=d.max_passages, help=f"passages kept (default {d.max_passages})")
    g.add_argument("--expansion", choices=EXPANSIONS, default="template", help="facet queries from templates (default) or an LLM")
    add_backend_arguments(g, model_help="for --expansion llm: ")
    r = p.add_argument_group("reach (what a configuration's deciding prompts show)")
    r.add_argument("--agent", action="append", dest="agents", metavar="SPEC", default=[],
                   help="a model-free configuration to measure reach for, repeatable: rag, direct, "
                        "'iba?expansion=template&reranker=rules&compact=none' and its variants")
    r.add_argument("--budget", action="append", type=positive_int, dest="budgets", metavar="TOKENS", default=[],
                   help=f"deciding-prompt size in tokens (about 4 characters each), repeatable (default: {', '.join(map(str, BUDGETS))})")
    p.add_argument("--seed", type=int, default=42)
    add_embedder_arguments(p)


def deep_options(args: argparse.Namespace):
    from iba.retrieval.deep import DeepOptions

    return DeepOptions(expansion="template", reranker="rules", k=args.k, method=args.method, feedback=not args.no_feedback,
                       scan=not args.no_scan, repeats=not args.no_repeats, slots=args.slots, values=args.values, contrast=args.contrast,
                       max_passages=args.max_passages)


def main(args: argparse.Namespace) -> int:
    from iba.commands.embedder_options import embedder_from_args
    from iba.dataset import Dataset
    from iba.llm.base import LLMError
    from iba.retrieval.evaluate import RecallTable, gold_turns, ranked_lists, sample_users
    from iba.run.prompt_reach import ReachTable
    from iba.retrieval.index import HistoryIndex
    from iba.retrieval.llm_expansion import llm_facet_queries

    try:
        args.embedder = embedder_from_args(args)
    except (ValueError, RuntimeError) as e:
        return fail(e, "iba eval-retrieval")
    ds = Dataset(args.dataset)
    keys = ds.answer_keys()
    instances = list(ds.instances)
    if args.users:
        instances = sample_users(instances, args.users, args.seed)
    if args.limit:
        instances = instances[: args.limit]
    budgets = args.budgets or list(BUDGETS)
    if args.agents:
        from iba.run.prompt_reach import check_spec

        for spec in args.agents:
            try:
                check_spec(spec)
            except ValueError as e:
                return fail(f"--agent {spec}: {e}", "iba eval-retrieval")
        if any(b < 500 for b in budgets):
            return fail("--budget must be >= 500 tokens", "iba eval-retrieval")
    backend = None
    if args.expansion == "llm":
        backend = backend_from_args(args.model, args)
    opts = deep_options(args)
    scenarios = ds.scenario_names  # public: the tasks' own names
    table = RecallTable()
    reach = ReachTable(args.agents, budgets)
    skipped = 0
    start = time.perf_counter()
    for n, task in enumerate(instances, start=1):
        key = keys[task.instance_id]
        gold = gold_turns(key)
        history = ds.history(task.user_id)
        try:
            if gold:
                index = HistoryIndex.build(history, args.embedder, Path(args.cache_dir), unit=args.unit)
                queries = asyncio.run(llm_facet_queries(backend, task, args.seed))[0] if backend else None
                table.add(ranked_lists(index, task, opts, queries, scenarios=scenarios), gold)
            else:
                skipped += 1
            if args.agents:
                asyncio.run(reach.add(task, key, history, Path(args.cache_dir), args.embedder, scenarios))
        except LLMError as e:  # an embeddings (or --expansion llm) server that failed after its retries
            print(f"\niba eval-retrieval: {task.instance_id}: {e}; indexes embedded so far are cached, "
                  "rerun the same command to go on", file=sys.stderr)
            return 1
        if sys.stderr.isatty():
            print(f"\r{n}/{len(instances)} instances", end="", file=sys.stderr, flush=True)
    if sys.stderr.isatty():
        print(file=sys.stderr)
    summary = table.summary()
    if args.json:
        print(json.dumps(summary | ({"reach": reach.summary()} if args.agents else {})))
        return 0
    print(f"dataset {args.dataset} ({ds.name}): {len(instances) - skipped} instances with gold evidence"
          f"{f', {skipped} without' if skipped else ''}; embedder {args.embedder}, unit {args.unit}, "
          f"expansion {args.expansion}; {time.perf_counter() - start:.1f}s")
    print(f"{'method':<12}{'recall@3':>10}{'recall@10':>11}")
    for method, row in summary.items():
        print(f"{method:<12}{row['recall@3']:>10.3f}{row['recall@10']:>11.3f}")
    if args.agents:
        print("\nreach: share of targets whose gold clause appears whole in a deciding prompt (n targets; "
              "tokens: the largest deciding prompt, mean over instances)")
        print(f"{'configuration':<60}{'budget':>8}{'slots':>16}{'checkpoints':>16}{'tokens':>8}")
        for row in reach.summary():
            cells = [f"{row[k]:.3f} ({row['n_' + k]})" if row["n_" + k] else "-" for k in ("slots", "checkpoints")]
            print(f"{row['agent']:<60}{row['budget']:>8}{cells[0]:>16}{cells[1]:>16}{row['tokens']:>8.0f}")
    return 0
