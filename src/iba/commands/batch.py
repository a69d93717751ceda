"""`iba batch status|submit|collect|import|answer DIR`: the rounds that `iba run ... --batch DIR` writes."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from iba.commands import fail


def add_arguments(p: argparse.ArgumentParser) -> None:
    from iba.argtypes import positive_int
    from iba.commands.model_options import add_backend_arguments

    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    st = sub.add_parser("status", help="rounds, requests, and how many are answered or await answers")
    st.add_argument("dir", type=Path, help="batch folder (from `iba run ... --batch DIR`)")
    sm = sub.add_parser("submit", help="send every round file not yet sent through the OpenAI Batch API",
                        description="Upload each round file not yet sent (Files API, purpose batch) and create one "
                        "batch per file (/v1/chat/completions, 24h window). Needs OPENAI_API_KEY; the endpoint is "
                        "--base-url or OPENAI_BASE_URL (default OpenAI's).")
    co = sub.add_parser("collect", help="fetch the results of sent batches that have finished",
                        description="Ask each sent batch for its state and store the output of finished ones in "
                        "DIR/results/; exits 1 while some are still running. Then rerun `iba run ... --batch DIR`.")
    for sp in (sm, co):
        sp.add_argument("dir", type=Path)
        sp.add_argument("--base-url", default=None,
                        help="the provider's API URL (default: $OPENAI_BASE_URL, else OpenAI)")
    im = sub.add_parser("import", help="store a Batch API output file answered elsewhere",
                        description="Check every line of RESULTS (custom_id one of DIR's requests; a response "
                        "with status_code and body, or an error) and store it in DIR/results/.")
    im.add_argument("dir", type=Path)
    im.add_argument("results", type=Path, help="a JSONL file of Batch API output lines")
    an = sub.add_parser("answer", help="answer the awaiting requests here with a model (offline answerer)",
                        description="Put every request that awaits its answer to --model (the embedded model by "
                        "default, or an openai: server) and store the replies as Batch API output lines. Reads "
                        "only the request bodies, as a provider would.")
    an.add_argument("dir", type=Path)
    add_backend_arguments(an)
    an.add_argument("--limit", type=positive_int, default=None, help="answer at most N requests")
    an.add_argument("--quiet", action="store_true", help="no progress bar")


def main(args: argparse.Namespace) -> int:
    from iba.batch.folder import BatchError, BatchFolder

    try:
        folder = BatchFolder(args.dir)
        return ACTIONS[args.action](folder, args)
    except BatchError as e:
        return fail(e)


def _status(folder, args) -> int:
    from iba.batch.lines import same_model

    s = folder.status()
    print(f"{folder.root}: {s['rounds']} round(s), {s['requests']} request(s): {s['answered']} answered, "
          f"{s['awaiting']} awaiting, {s['new']} to send again, {s['rejected']} rejected, {s['given_up']} given up")
    for (asked, answered), n in sorted(folder.answered_by().items()):
        other = "" if same_model(asked, answered) or answered == "(not named)" else "  <- another model"
        print(f"  requests for {asked}: {n} answered by {answered}{other}")
    return 0


def _submit(folder, args) -> int:
    from iba.batch.provider import client, submit

    sent = submit(folder, client(args.base_url))
    for s in sent:
        print(f"sent {s['file']}: {s['requests']} request(s) as batch {s['batch_id']} ({s['status']})")
    if not sent:
        print("nothing to send: every round file was sent already")
    return 0


def _collect(folder, args) -> int:
    from iba.batch.provider import client, collect

    out = collect(folder, client(args.base_url))
    print(f"{out['collected']} batch(es) collected ({out['results']} result lines), {out['running']} still running")
    for f, state in out["states"].items():
        print(f"  {f}: {state}")
    return 1 if out["running"] else 0


def _import(folder, args) -> int:
    lines = folder.read_results_file(args.results)
    other = folder.other_models(list(enumerate(lines, 1)))
    if other:  # stored all the same: the trace of every step they answer names the model (answered_by)
        lineno, asked, answered = other[0]
        print(f"warning: {args.results}:{lineno}: answered by {answered}, but the request asked {asked} "
              f"({len(other)} such answer(s)); the run's records will be stored under the model it asked, and "
              "each trace step names the model that answered", file=sys.stderr)
    path = folder.add_results(lines, f"import-{args.results.stem}")
    ok = sum(x.ok for x in lines)
    print(f"{len(lines)} result line(s) stored in {path}: {ok} answers, {len(lines) - ok} failures")
    return 0


def _answer(folder, args) -> int:
    from iba.batch.answer import answer_awaiting
    from iba.commands.model_options import backend_from_args

    try:
        backend = backend_from_args(args.model, args)
    except (ValueError, FileNotFoundError, RuntimeError) as e:
        return fail(e)
    counts = asyncio.run(answer_awaiting(folder, backend, limit=args.limit, progress=not args.quiet))
    print(f"{counts['answered']} answered, {counts['failed']} failed (asked again next round) by {backend.model_id}"
          + (f"; {counts['other_model']} of them were written for another model" if counts["other_model"] else ""))
    return 1 if counts["failed"] else 0


ACTIONS = {"status": _status, "submit": _submit, "collect": _collect, "import": _import, "answer": _answer}
