"""`iba build`: build an IBA-Bench dataset directory."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from iba.argtypes import nonnegative_int, out_folder, positive_int
from iba.commands import fail
from iba.commands.model_options import add_backend_arguments, backend_from_args
from iba.construct.presets import PRESETS

EPILOG = """examples:
  iba build --preset demo --out demo-data
  iba build --preset full --out iba-bench --seed 42
  iba build --preset small --out small-llm --writer llm --model local:qwen2.5-coder-0.5b
  iba build --preset demo --out demo-llm --writer llm --model openai:my-model --base-url http://127.0.0.1:8000/v1
  iba build --preset full --out full-llm --writer llm --model openai:gpt-4o-mini --llm-scope exchanges --batch full-batch
      (exit 3: a round of requests; `iba batch submit full-batch`, `iba batch collect full-batch`, or
      `iba batch answer full-batch --model M`; then the same command again, until it exits 0)

An interrupted --writer llm build resumes when rerun with the same --out and options (a journal in
--out keeps every finished session). Cost of each --llm-scope for the full preset: bench/BENCHMARKS.md.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from iba.construct.llm_writer import SCOPES

    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    presets = "; ".join(f"{p.name}: {p.help}" for p in PRESETS.values())
    parser.add_argument("--preset", choices=list(PRESETS), default="demo", help=f"dataset size ({presets})")
    parser.add_argument("--out", required=True, type=out_folder, help="output directory (created; files in it are replaced)")
    parser.add_argument("--seed", type=int, default=42, help="random seed; the same seed gives the same dataset (default 42)")
    parser.add_argument("--personas", type=positive_int, default=None, help="override the preset's number of personas")
    parser.add_argument(
        "--writer",
        choices=["procedural", "llm"],
        default="procedural",
        help="who writes the text: template banks (offline, deterministic, default) or a model (--model)",
    )
    add_backend_arguments(parser, model_default=None, model_help="for --writer llm: ")
    parser.add_argument(
        "--noise-ratio",
        type=float,
        default=None,
        help="history turns per relevant (evidence) turn; the paper's figure is 100 (default: 100, demo 50)",
    )
    parser.add_argument(
        "--history-turns",
        type=int,
        default=None,
        help="instead of --noise-ratio: make every history this many turns long (evidence is never dropped)",
    )
    parser.add_argument(
        "--no-distractors",
        action="store_true",
        help="leave out distractor preferences (preference talk no task depends on; on by default, see README) "
        "to measure what they change",
    )
    parser.add_argument("--max-rewrites", type=nonnegative_int, default=2, help="llm writer: rewrites of an evidence or distractor turn that fails its check (default 2)")
    parser.add_argument("--concurrency", type=positive_int, default=4, help="llm writer: model calls in flight at once (default 4)")
    parser.add_argument(
        "--llm-scope",
        choices=list(SCOPES),
        default="all",
        help="llm writer: what the model writes. all: every turn (default); exchanges: only the evidence, distractor "
        "and state exchanges, the filler chat around them stays procedural (the cheap mode: one call fewer per session "
        "and none of the filler's completion tokens; bench/BENCHMARKS.md has both modes' cost for the full preset)",
    )
    parser.add_argument(
        "--batch",
        type=Path,
        default=None,
        metavar="DIR",
        help="llm writer: call no model; write every pending call as OpenAI Batch API request files in DIR (a round "
        "per run), replay the answers already there, and exit 3 while calls await answers. Answer a round with `iba "
        "batch submit DIR` + `iba batch collect DIR`, `iba batch answer DIR --model M` or `iba batch import DIR FILE`, "
        "then rerun this command; it writes the dataset and exits 0 when every session is written",
    )
    parser.add_argument(
        "--workers",
        type=positive_int,
        default=None,
        help="procedural writer: processes that plan and write the personas' histories (default: 2, or 1 on a "
        "one-CPU machine); the dataset is byte-identical for any number",
    )
    parser.add_argument(
        "--generator", type=int, choices=(2, 3), default=3,
        help="procedural generator version: 3 (default) writes coherent exchanges (an answer to the question asked, "
        "one topic through a session, few asides); 2 builds what earlier releases built, for comparison",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def main(args: argparse.Namespace) -> int:
    from iba.construct.builder import build_dataset
    from iba.construct.llm_writer import BatchPending
    from iba.construct.stats import format_table2
    from iba.dataset import DatasetError

    from iba.llm.models import ModelNotInstalledError

    backend = None
    if args.writer == "llm":
        if not args.model:
            return fail("--writer llm needs --model (e.g. local:qwen2.5-coder-0.5b or openai:NAME)", "iba build")
        try:
            # --batch calls no model: a server backend is built for its name only, no key needed
            backend = backend_from_args(args.model, args, sends=args.batch is None)
        except (ValueError, ModelNotInstalledError) as e:
            return fail(e, "iba build")
    else:
        for given, option in ((args.model, "--model"), (args.batch, "--batch"), (args.llm_scope != "all", "--llm-scope")):
            if given:
                print(f"iba build: note: {option} is only used with --writer llm", file=sys.stderr)
    t0 = time.perf_counter()
    try:
        manifest = build_dataset(
            args.out,
            preset=args.preset,
            seed=args.seed,
            writer=args.writer,
            backend=backend,
            noise_ratio=args.noise_ratio,
            history_turns=args.history_turns,
            personas=args.personas,
            progress=not args.no_progress,
            max_rewrites=args.max_rewrites,
            concurrency=args.concurrency,
            distractors_on=not args.no_distractors,
            llm_scope=args.llm_scope,
            batch=args.batch if args.writer == "llm" else None,
            workers=args.workers,
            generator=args.generator,
        )
    except BatchPending as p:
        where = ", ".join(str(f) for f in sorted(p.round_dir.glob("*.requests.jsonl"))) if p.round_dir else ""
        if p.written:
            print(f"batch: {p.written} request(s) written to {where}" + (f"; {p.waiting} more await an earlier round" if p.waiting else ""))
        elif p.waiting:
            print(f"batch: no new requests; {p.waiting} await their answers in {p.root} (`iba batch status {p.root}`)")
        print(f"batch: {p.sessions} of {p.total} session(s) wait for answers. Next: `iba batch submit {p.root}` then "
              f"`iba batch collect {p.root}` (or `iba batch answer {p.root} --model M` / `iba batch import {p.root} "
              "RESULTS.jsonl`), then rerun this command", file=sys.stderr)
        return 3
    except (ValueError, DatasetError) as e:
        return fail(e, "iba build")
    elapsed = time.perf_counter() - t0
    stats = json.loads((Path(args.out) / "stats.json").read_text(encoding="utf-8"))
    print(format_table2(stats))
    c = manifest.counts
    print(f"\nwrote {args.out}: {c['personas']} personas, {c['instances']} instances, {c['turns']} turns in {elapsed:.1f}s")
    return 0
