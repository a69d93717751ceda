"""`iba judge-check MODEL`: calibrate a judge on fixed pairs with known verdicts (see iba.eval.judge_check)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from iba.argtypes import positive_int
from iba.commands import fail
from iba.eval.judge_check import DEFAULT_N, DEFAULT_SEED


def add_arguments(p: argparse.ArgumentParser) -> None:
    from iba.commands.model_options import add_backend_arguments

    p.add_argument("judge", metavar="MODEL", help="the judge model string, e.g. local:qwen2.5-coder-0.5b")
    p.add_argument("--dataset", type=Path, default=None,
                   help="build the cases from this dataset's answer key (default: from the shipped taxonomy)")
    p.add_argument("--n", type=positive_int, default=DEFAULT_N, help=f"number of cases, half known violations (default {DEFAULT_N})")
    p.add_argument("--seed", type=int, default=DEFAULT_SEED, help=f"case selection seed (default {DEFAULT_SEED})")
    p.add_argument("--store", type=Path, default=None, help="save the result in this result store (table judge_checks)")
    p.add_argument("--json", action="store_true", help="print the result as JSON instead of a table")
    p.add_argument("--concurrency", type=positive_int, default=4, help="judge calls in flight (default 4)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_backend_arguments(p, model=False)  # the judge is the positional MODEL


def main(args: argparse.Namespace) -> int:
    from tqdm.auto import tqdm

    from iba.dataset import DatasetError
    from iba.eval.judge_check import build_cases, format_result, judge_check
    from iba.commands.model_options import backend_from_args

    try:
        cases = build_cases(args.n, args.seed, dataset=args.dataset)
    except (ValueError, DatasetError, FileNotFoundError) as e:
        return fail(e)
    try:
        backend = backend_from_args(args.judge, args, judge=True)  # --judge-base-url applies here too
    except (ValueError, FileNotFoundError, RuntimeError) as e:
        return fail(e)
    bar = tqdm(total=len(cases), desc="judge-check", unit="case", disable=args.quiet or args.json)
    try:
        result = asyncio.run(judge_check(backend, cases, concurrency=args.concurrency, on_case=lambda _: bar.update(1),
                                         source=str(args.dataset) if args.dataset else "taxonomy", seed=args.seed))
    finally:
        bar.close()
    if args.json:
        print(result.model_dump_json(indent=2))
    else:
        print(format_result(result))
    # a calibration over failed calls would stand beside every report as if it were the judge's
    # own: with nothing scored, or any call lost to the infrastructure, nothing is saved
    if result.scored == 0 or result.errored:
        why = (f"{result.errored} of {result.n} judge calls failed" if result.errored
               else f"the judge scored none of the {result.n} cases")
        print(f"error: {why}; nothing saved" + ("; rerun once the judge's server answers" if result.errored else ""),
              file=sys.stderr)
        return 1
    if args.store is not None:
        from iba.run.store import Store

        with Store(args.store) as store:
            new = store.put_judge_check(result)
        if not args.json:
            print(f"store: {args.store} ({'saved' if new else 'same check already stored'})")
    return 0
