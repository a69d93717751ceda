"""The `iba` command line: a thin dispatcher.

Each subcommand is a module of iba.commands exposing `add_arguments(parser)` and
`main(args) -> int`; modules are imported only when their command runs, so `iba --help` stays
fast and optional dependencies stay optional.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# name -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("iba.commands.demo", "build the demo dataset, run an agent, score and report (offline)"),
    "build": ("iba.commands.build", "build an IBA-Bench dataset (personas, histories, tasks, answer key)"),
    "stats": ("iba.commands.stats", "print Table 2 statistics and the tell audit of a dataset and write stats.json"),
    "validate": ("iba.commands.validate", "AI annotation of sampled instances with agreement statistics"),
    "taxonomy": ("iba.commands.taxonomy", "show the shipped taxonomy (domains, scenarios, dimensions)"),
    "run": ("iba.commands.run", "run agents on a dataset, store and score the actions"),
    "score": ("iba.commands.score", "(re)score stored runs with judges, verifiers and slot matching"),
    "judge-check": ("iba.commands.judge_check", "calibrate a judge on fixed cases with known verdicts (false-pass rate)"),
    "report": ("iba.commands.report", "tables, plots and an HTML report from stored runs"),
    "eval-retrieval": ("iba.commands.eval_retrieval", "recall@k of gold evidence per retrieval method; reach of configurations per prompt budget"),
    "index": ("iba.commands.index", "embed the histories into the retrieval index cache ahead of a run (in parallel)"),
    "serve-embeddings": ("iba.commands.serve_embeddings", "serve an embedder (the packaged MiniLM) over the OpenAI /v1/embeddings protocol"),
    "import": ("iba.commands.import_data", "import external data (PrefEval) as an IBA dataset"),
    "batch": ("iba.commands.batch", "OpenAI Batch API rounds of `iba run --batch`: status, submit, collect, import, answer"),
    "submit": ("iba.commands.submit", "a submission file of stored results (prepare) and its check (validate)"),
    "export": ("iba.commands.export", "export a dataset as a Hugging Face dataset repository (parquet + dataset card)"),
}


def build_parser() -> argparse.ArgumentParser:
    from iba import __version__

    parser = argparse.ArgumentParser(
        prog="iba",
        description="IBA: build IBA-Bench, run personalized agents on it, score and report.",
        epilog="Run `iba COMMAND --help` for a command's options.",
    )
    parser.add_argument("--version", action="version", version=f"iba {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(_module=module)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    # only the chosen command's module is imported to add its arguments
    if argv and argv[0] in COMMANDS:
        module = importlib.import_module(COMMANDS[argv[0]][0])
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        module.add_arguments(sub.choices[argv[0]])
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return 2
    module = importlib.import_module(args._module)
    try:
        return int(module.main(args) or 0)
    except KeyboardInterrupt:
        print("interrupted; rerun the same command to resume", file=sys.stderr)
        return 130
    except Exception as e:
        # a bad dataset file or result store reaching any command is the user's to fix: its message
        # names the file (and line), a traceback would only hide it. Anything else is a bug: let it show.
        from iba.dataset import DatasetError
        from iba.run.store import StoreError

        if isinstance(e, (DatasetError, StoreError)):  # a store path that is a folder or not SQLite
            print(f"error: {e}", file=sys.stderr)
            return 2
        raise


if __name__ == "__main__":
    sys.exit(main())
