"""`iba export hf DIR OUT`: write a dataset as a Hugging Face dataset repository (parquet + card)."""

from __future__ import annotations

import argparse
from pathlib import Path

from iba.commands import fail


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="format", metavar="FORMAT", required=True)
    hf = sub.add_parser("hf", help="a Hugging Face dataset repository: parquet per config and a dataset card",
                        description="Write DIR as a Hugging Face dataset repository in OUT: parquet per config "
                        "(instances, histories, personas; the evaluator-only answer_key, distractors and persona_states) "
                        "and README.md, the dataset card. Load it with datasets.load_dataset(OUT, 'instances') or pyarrow; run agents on it "
                        "with `iba run OUT`. Needs the hf extra (pip install 'iba[hf]').")
    hf.add_argument("dataset", type=Path, metavar="DIR", help="dataset directory (from `iba build` or `iba import`)")
    hf.add_argument("out", type=Path, metavar="OUT", help="output folder (created; an earlier export there is replaced)")
    hf.add_argument("--hold-back", action="store_true",
                    help="leave out the evaluator-only configs (answer key, distractor labels, persona states): a "
                    "public release with a hidden test split, scored with `iba run OUT --answer-key DIR/answer_key.jsonl` "
                    "(DIR keeps the other hidden files beside the key: the exported dataset folder does)")
    hf.add_argument("--license", default=None,
                    help="license id for the card (default: cc-by-nc-4.0 for PrefEval imports, else mit)")
    hf.add_argument("--name", default=None, help="pretty name for the card (default: IBA-Bench: <dataset name>)")


def main(args: argparse.Namespace) -> int:
    from iba.dataset import DatasetError
    from iba.hf import HFError
    from iba.hf.export import export_hf

    try:
        summary = export_hf(args.dataset, args.out, hold_back=args.hold_back, license=args.license,
                            pretty_name=args.name)
    except (DatasetError, HFError) as e:
        return fail(e)
    for name, c in summary["configs"].items():
        print(f"{name}: {c['rows']:,} rows, {c['bytes'] / 1e6:.2f} MB")
    if summary["held_back"]:
        print(f"held back: {', '.join(summary['held_back'])}")
    print(f"card: {summary['card']}")
    print(f"load: datasets.load_dataset({str(args.out)!r}, 'instances'); run: iba run {args.out} --agent rag")
    return 0
