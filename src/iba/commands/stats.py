"""`iba stats DATASET [--json]`: Table 2 statistics and the tell audit of a dataset (built or
imported, e.g. PrefEval); writes DATASET/stats.json."""

from __future__ import annotations

import argparse
import json

from iba.commands import fail


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dataset", help="dataset directory (made by `iba build`)")
    parser.add_argument("--json", action="store_true", help="print the statistics as one JSON object instead of a table")
    parser.add_argument(
        "--no-audit",
        action="store_true",
        help="skip the tell audit (a lexical classifier that tries to find the evidence by wording; needs "
        "scikit-learn, the 'audit' extra; ~30 s at full size)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        choices=(1, 2),
        default=None,
        help="2: the tell audit runs in a second process beside the rest (default where the machine has 2 CPUs); "
        "the figures are the same",
    )


def main(args: argparse.Namespace) -> int:
    from iba.construct.stats import format_table2, write_stats
    from iba.construct.workers import default_workers
    from iba.dataset import Dataset, DatasetError

    try:
        # the checks `iba run` makes, with its messages (file:line): the statistics read the files
        # raw and fast, so a broken one must be caught before, not counted short
        Dataset(args.dataset).check()
        stats = write_stats(args.dataset, audit=not args.no_audit, workers=args.workers or default_workers())
    except (DatasetError, ValueError) as e:
        return fail(e)
    if args.json:
        print(json.dumps(stats, indent=2, sort_keys=True))
    else:
        print(format_table2(stats))
    return 0
