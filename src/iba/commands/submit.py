"""`iba submit prepare|validate`: a results file to share (iba-submission/2), and its check."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from iba.commands import fail


def _prices(text: str) -> tuple[float, float]:
    try:
        a, b = (float(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give PROMPT,COMPLETION prices in USD per million tokens, e.g. 0.15,0.6") from None
    if a < 0 or b < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: prices must be >= 0")
    return a, b


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    pr = sub.add_parser("prepare", help="write a submission file from a result store",
                        description="One entry per agent x model of STORE on the dataset: every trial's result "
                        "(verdicts per slot or checkpoint, score, tokens, wall time), and what follows from them: "
                        "Table 4 per domain with 95% bootstrap intervals and n, pass^k where trials > 1, tokens (and "
                        "cost with --usd-per-mtok); the sample (the full dataset, or the subset run, by id); the "
                        "dataset's generator, its version, seed, tell audit and feature audit; the judges with their "
                        "judge-check; flags for modified prompts and omitted instances.")
    pr.add_argument("store", type=Path, help="result store (from `iba run`)")
    pr.add_argument("--dataset", type=Path, required=True, help="the dataset the runs were on (a folder or an `iba export hf` folder)")
    pr.add_argument("--answer-key", type=Path, default=None, help="a held-back answer key (as given to `iba run`)")
    pr.add_argument("--out", type=Path, required=True, help="the submission file to write (JSON)")
    pr.add_argument("--run", action="append", dest="runs", help="only this run name (repeatable; default: all)")
    pr.add_argument("--judges", default=None, help="comma-separated judge models whose verdicts count (default: all stored)")
    pr.add_argument("--name", default=None, help="the submitter's name")
    pr.add_argument("--email", default=None, help="the submitter's contact email")
    pr.add_argument("--organization", default=None, help="the submitting organization")
    pr.add_argument("--notes", default="", help="what differs from the standard protocol (a custom submission needs it)")
    pr.add_argument("--reference", action="append", default=[], metavar="TITLE=URL", help="a link (code, paper), repeatable")
    pr.add_argument("--usd-per-mtok", type=_prices, default=None, metavar="IN,OUT",
                    help="prices in USD per million prompt and completion tokens, to state a cost")
    pr.add_argument("--cache-dir", type=Path, default=Path(".iba-cache"), help="where an `iba export hf` dataset is read back (default .iba-cache)")
    va = sub.add_parser("validate", help="check a submission file: its schema, and every aggregate against its "
                        "per-instance results",
                        description="Check FILE against iba-submission/2, then recompute every aggregate (per domain "
                        "and overall with their intervals, pass^k, counts, cost, omissions) from its per-instance "
                        "results and report each that differs; with --dataset, also that it was made on that dataset "
                        "(same manifest, generator, seed, instance ids). Exits 2 with every problem listed.")
    va.add_argument("file", type=Path)
    va.add_argument("--dataset", type=Path, default=None, help="the dataset the file claims (optional cross-check)")
    va.add_argument("--cache-dir", type=Path, default=Path(".iba-cache"), help=argparse.SUPPRESS)


def main(args: argparse.Namespace) -> int:
    return _prepare(args) if args.action == "prepare" else _validate(args)


def _prepare(args: argparse.Namespace) -> int:
    from iba.dataset import DatasetError, atomic_write_text
    from iba.hf import HFError
    from iba.hf.load import dataset_dir
    from iba.submit.prepare import prepare
    from iba.submit.schema import Contact, Reference

    refs = []
    for r in args.reference:
        title, eq, url = r.partition("=")
        if not eq or not url:
            return fail(f"argument --reference: {r!r} is not TITLE=URL")
        refs.append(Reference(title=title, url=url, type="github" if "github.com" in url else "other"))
    if not args.store.is_file():
        return fail(f"{args.store}: no such store")
    if args.out.is_dir():
        return fail(f"argument --out: {args.out} is a folder")
    try:
        root = dataset_dir(args.dataset, args.cache_dir)
        sub = prepare(args.store, root, answer_key=args.answer_key, runs=args.runs,
                      judges=[j.strip() for j in args.judges.split(",")] if args.judges else None,
                      submitter=Contact(name=args.name, email=args.email), organization=args.organization,
                      references=refs, notes=args.notes, usd_per_mtok=args.usd_per_mtok)
    except (DatasetError, HFError, ValueError) as e:
        return fail(e)
    atomic_write_text(args.out, sub.model_dump_json(indent=2) + "\n")
    print(f"{args.out}: {sub.submission_type} submission, {len(sub.entries)} entr{'y' if len(sub.entries) == 1 else 'ies'} "
          f"on {sub.dataset.id}" + (f", a sample of {sub.sample.n} (seed {sub.sample.seed})" if sub.sample else ""))
    for e in sub.entries:
        o = e.results["overall"]
        flags = [f for f, on in (("modified prompts", e.verification.modified_prompts),
                                 (f"subset of {e.sample.instances}", e.sample.kind == "subset"),
                                 (f"{len(e.verification.omitted)} omitted", e.verification.omitted_instances),
                                 (f"reference: {e.reference_kind}", e.reference)) if on]
        ci = f" [{o.ci[0]}, {o.ci[1]}]" if o.ci else ""
        print(f"  {e.agent} ({e.model}): {o.score if o.score is not None else '-'}{ci} (n={o.n})"
              + (f" [{', '.join(flags)}]" if flags else ""))
    return 0


def _validate(args: argparse.Namespace) -> int:
    from iba.submit.schema import Submission, problems

    try:
        obj = json.loads(args.file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return fail(f"{args.file}: no such file")
    except (OSError, UnicodeDecodeError) as e:
        return fail(f"{args.file}: cannot read: {e}")
    except json.JSONDecodeError as e:
        return fail(f"{args.file}:{e.lineno}: not JSON: {e.msg}")
    from iba.submit import recompute

    found = problems(obj)
    ids = None
    if not found and args.dataset is not None:
        from iba.dataset import DatasetError
        from iba.hf.load import open_dataset
        from iba.submit.prepare import dataset_info

        try:
            ds = open_dataset(args.dataset, args.cache_dir)
            mine = dataset_info(ds)
        except (DatasetError, ValueError) as e:
            return fail(e)
        theirs = Submission.model_validate(obj).dataset
        for field in ("id", "generator", "generator_version", "seed", "instances", "per_domain"):
            if getattr(mine, field) != getattr(theirs, field):
                found.append(f"dataset.{field}: {getattr(theirs, field)!r} in the file, {getattr(mine, field)!r} in {args.dataset}")
        ids = [t.instance_id for t in ds.instances]
    if not found:  # the aggregates, recomputed from the per-instance results
        found = recompute.problems(Submission.model_validate(obj), ids)
    if found:
        print(f"{args.file}: not a valid iba-submission/1 ({len(found)} problem{'s' if len(found) > 1 else ''}):", file=sys.stderr)
        for line in found:
            print(f"  {line}", file=sys.stderr)
        return 2
    sub = Submission.model_validate(obj)
    print(f"{args.file}: valid {sub.submission_type} submission, {len(sub.entries)} entr"
          f"{'y' if len(sub.entries) == 1 else 'ies'} on {sub.dataset.id}")
    return 0
