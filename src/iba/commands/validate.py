"""`iba validate DATASET --annotators m1,m2 --sample 200`: AI annotation with agreement (Table 11)."""

from __future__ import annotations

import argparse
import asyncio

from iba.argtypes import positive_int
from iba.commands import fail
from iba.commands.model_options import add_backend_arguments, backend_from_args


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dataset", help="dataset directory (made by `iba build`)")
    parser.add_argument(
        "--annotators",
        required=True,
        help="comma-separated model strings, at least two (the same model twice gives two independent sampled annotations), "
        "e.g. local:qwen2.5-coder-0.5b,local:smollm2-135m or openai:gpt-4o-mini,openai:gpt-4o-mini",
    )
    parser.add_argument("--sample", type=positive_int, default=200, help="number of instances to annotate (default 200, as in the paper)")
    parser.add_argument("--seed", type=int, default=42, help="seed of the sample and the annotators (default 42)")
    add_backend_arguments(parser, model=False)  # the models are --annotators
    parser.add_argument("--concurrency", type=positive_int, default=4, help="model calls in flight at once (default 4)")
    parser.add_argument("--out", default=None, help="where to write the report (default DATASET/validation.json)")
    parser.add_argument("--json", action="store_true", help="print the report's agreement figures as JSON")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def main(args: argparse.Namespace) -> int:
    import json

    from iba.construct.validate import format_table11, validate_dataset
    from iba.dataset import DatasetError
    from iba.llm.models import ModelNotInstalledError

    models = [m.strip() for m in args.annotators.split(",") if m.strip()]
    if len(models) < 2:
        return fail("--annotators needs at least two model strings, e.g. m1,m2", "iba validate")
    try:
        backends = {m: backend_from_args(m, args) for m in dict.fromkeys(models)}
        annotators = [(f"{m}#{i + 1}" if models.count(m) > 1 else m, backends[m]) for i, m in enumerate(models)]
        report = asyncio.run(
            validate_dataset(
                args.dataset, annotators, sample=args.sample, seed=args.seed, concurrency=args.concurrency, out=args.out, progress=not args.no_progress
            )
        )
    except (DatasetError, ValueError, ModelNotInstalledError) as e:
        return fail(e, "iba validate")
    if args.json:
        print(json.dumps({k: report[k] for k in ("sample", "annotators", "unscored", "pairs")}, indent=2))
    else:
        print(format_table11(report))
    return 0
