"""`iba report`: the paper's tables and figures from stored runs (iba.report.build writes them)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from iba.argtypes import out_folder
from iba.commands import fail
from iba.report.build import build_report


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("store", type=Path, help="result store written by `iba run` (SQLite)")
    p.add_argument("--dataset", action="append", type=Path, default=[], dest="datasets", metavar="DIR",
                   help="dataset of the runs (repeatable): a folder, an `iba export hf` folder or hf:owner/name, as "
                   "`iba run` takes it; needed for the analyses and the drill-down")
    p.add_argument("--answer-key", action="append", type=Path, default=None, dest="answer_keys", metavar="PATH",
                   help="a held-back answer key (as `iba run --answer-key`), one per --dataset in the same order")
    p.add_argument("--run", action="append", dest="runs", metavar="NAME", help="only this run name (repeatable; default: all)")
    p.add_argument("--out", type=out_folder, required=True, help="output folder")
    p.add_argument("--cache-dir", type=Path, default=Path(".iba-cache"),
                   help="where an `iba export hf` dataset is read back (default .iba-cache, as `iba run`)")
    p.add_argument("--judges", default=None,
                   help="comma-separated judge model strings whose verdicts count (default: every judge in the store)")


def main(args: argparse.Namespace) -> int:
    from iba.dataset import DatasetError
    from iba.hf import HFError
    from iba.hf.load import dataset_dir

    if not args.store.exists():
        return fail(f"no store at {args.store}; run `iba run` first")
    judges = [j.strip() for j in args.judges.split(",") if j.strip()] if args.judges else None
    if args.runs:
        from iba.run.store import Store

        with Store(args.store) as store:
            known = store.run_names()
        unknown = [r for r in args.runs if r not in known]
        if unknown:
            return fail(f"no run named {', '.join(unknown)} in {args.store}; runs: {', '.join(known) or '(none)'}")
    if args.answer_keys is not None and len(args.answer_keys) != len(args.datasets):
        return fail(f"argument --answer-key: give one per --dataset, in the same order "
                    f"({len(args.answer_keys)} for {len(args.datasets)})")
    try:
        datasets = [dataset_dir(d, args.cache_dir) for d in args.datasets]  # exports read back as `iba run` does
        html = build_report(args.store, datasets, args.out, runs=args.runs, judges=judges,
                            answer_keys=args.answer_keys)
    except (DatasetError, HFError) as e:
        return fail(e)
    table = args.out / "table4.md"
    print(table.read_text(encoding="utf-8"))
    for line in (args.out / "judges.md").read_text(encoding="utf-8").splitlines():
        if "WARNING" in line or "self-judging" in line:
            print(line.removeprefix("- "), file=sys.stderr)
    print(f"report: {html}")
    return 0
