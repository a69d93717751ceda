"""`iba build`: build an IBA-Bench dataset directory."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from iba.argtypes import nonnegative_int, out_folder, positive_int
from iba.commands.model_options import add_backend_arguments, backend_from_args
from iba.construct.presets import PRESETS

EPILOG = """examples:
  iba build --preset demo --out demo-data
  iba build --preset full --out iba-bench --seed 42
  iba build --preset small --out small-llm --writer llm --model local:qwen2.5-coder-0.5b
  iba build --preset demo --out demo-llm --writer llm --model openai:my-model --base-url http://127.0.0.1:8000/v1

An interrupted --writer llm build resumes when rerun with the same --out and options.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
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
    parser.add_argument("--max-rewrites", type=nonnegative_int, default=2, help="llm writer: rewrites of an evidence turn that fails the check (default 2)")
    parser.add_argument("--concurrency", type=positive_int, default=4, help="llm writer: model calls in flight at once (default 4)")
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
    from iba.construct.stats import format_table2
    from iba.dataset import DatasetError

    from iba.llm.models import ModelNotInstalledError

    backend = None
    if args.writer == "llm":
        if not args.model:
            print("iba build: --writer llm needs --model (e.g. local:qwen2.5-coder-0.5b or openai:NAME)", file=sys.stderr)
            return 2
        try:
            backend = backend_from_args(args.model, args)
        except (ValueError, ModelNotInstalledError) as e:
            print(f"iba build: {e}", file=sys.stderr)
            return 2
    elif args.model:
        print("iba build: note: --model is only used with --writer llm", file=sys.stderr)
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
            workers=args.workers,
            generator=args.generator,
        )
    except (ValueError, DatasetError) as e:
        print(f"iba build: {e}", file=sys.stderr)
        return 2
    elapsed = time.perf_counter() - t0
    stats = json.loads((Path(args.out) / "stats.json").read_text(encoding="utf-8"))
    print(format_table2(stats))
    c = manifest.counts
    print(f"\nwrote {args.out}: {c['personas']} personas, {c['instances']} instances, {c['turns']} turns in {elapsed:.1f}s")
    return 0
