"""`iba import SOURCE ...`: convert external data into an IBA dataset (today: PrefEval)."""

from __future__ import annotations

import argparse

from iba.adapters.prefeval_source import FORMS
from iba.commands import fail


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="source", metavar="SOURCE", required=True)
    p = sub.add_parser(
        "prefeval",
        help="PrefEval's benchmark_dataset folder (Zhao et al., ICLR 2025; CC BY-NC 4.0)",
        description=(
            "Import PrefEval as an IBA dataset: one user history per item (the preference-revealing "
            "turns among N filler messages from filtered_inter_turns.json), the item's question as the "
            "task, gold evidence turn ids, four judge checkpoints (PrefEval's error types) and the "
            "multiple-choice options as a QA probe. Deterministic for a seed."
        ),
        epilog=(
            "Example: iba import prefeval ../shared/data/prefeval --out data/prefeval-300 "
            "--topics travel_restaurant,shop_motors --filler-turns 300"
        ),
    )
    p.add_argument("prefeval_dir", metavar="PREFEVAL_DIR", help="folder holding explicit_preference/, implicit_preference/, mcq_options/ and filtered_inter_turns.json")
    p.add_argument("--out", required=True, metavar="DATASET", help="dataset folder to write (new, empty, or a previous import to replace)")
    p.add_argument("--topics", default="", help="comma-separated topics (default: every topic of the form's folder)")
    p.add_argument(
        "--form",
        choices=FORMS,
        default="explicit",
        help="how the preference is revealed: explicit statement, choice among options, or in passing in a persona conversation (default: explicit)",
    )
    p.add_argument("--filler-turns", type=int, default=300, metavar="N", help="filler messages per history (default: 300)")
    p.add_argument(
        "--position",
        choices=("start", "middle", "random"),
        default="start",
        help="where the preference session sits among the filler (default: start, as far from the question as possible)",
    )
    p.add_argument("--seed", type=int, default=42, help="seed for filler order, position and MCQ option order (default: 42)")
    p.add_argument("--limit", type=int, default=None, metavar="N", help="only the first N items of each topic (quick runs)")
    p.add_argument("--no-ack", action="store_true", help="explicit form: no synthetic assistant acknowledgement after the statement")


def main(args: argparse.Namespace) -> int:
    from iba.adapters.prefeval import REPORT_FILE, import_prefeval
    from iba.adapters.prefeval_source import PrefEvalError

    topics = [t.strip() for t in args.topics.split(",") if t.strip()] or None
    try:
        m = import_prefeval(
            args.prefeval_dir,
            args.out,
            topics=topics,
            form=args.form,
            filler_turns=args.filler_turns,
            position=args.position,
            seed=args.seed,
            synthetic_ack=not args.no_ack,
            limit=args.limit,
        )
    except PrefEvalError as e:
        return fail(e)
    c = m.counts
    print(f"imported PrefEval ({args.form}, {args.filler_turns} filler messages, position {args.position}) into {args.out}")
    print(f"  topics {c['topics']}: {', '.join(m.params['topics'])}")
    print(f"  users/instances {c['instances']}, turns {c['turns']}, checkpoints {c['checkpoints']}, QA probes {c['qa_probes']}")
    print(f"  gold evidence located {c['evidence_located']}, unlocated {c['evidence_unlocated']} (empty evidence; see {REPORT_FILE})")
    if c["mcq_missing"]:
        print(f"  no MCQ options found for {c['mcq_missing']} instances (no QA probe)")
    if c["synthetic_turns"]:
        print(f"  synthetic assistant acknowledgements {c['synthetic_turns']} (turn ids end in {m.params['synthetic_turn_suffix']})")
    return 0
