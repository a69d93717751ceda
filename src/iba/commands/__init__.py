"""The `iba` subcommands, one module each (iba.cli names them and imports only the one that runs).

Each exposes `add_arguments(parser)` and `main(args) -> int` and stays thin: arguments, errors a
user can act on, exit status; the work lives in the packages below. The top layer of
docs/ARCHITECTURE.md: a command may import any package, no package imports a command.

    demo            build the demo dataset, run, score, report
    build, stats, validate, taxonomy     construction (iba.construct, iba.taxonomy)
    run             run agents, store, score inline
    score, judge_check                   scoring and judge calibration (iba.eval)
    report          tables, figures, HTML (iba.report.build)
    eval_retrieval, index                retrieval recall and reach; the index cache (iba.retrieval)
    serve_embeddings                     an embedder behind /v1/embeddings (iba.retrieval.embeddings_server)
    embedder_options                     not a command: the --embedder options of run, index, eval-retrieval
    model_options                        not a command: the model/endpoint/cache options of every command
                                         that calls a model (add_backend_arguments, backend_from_args)
    import_data     `iba import` (iba.adapters)
    batch, submit, export                batch rounds, submission files, Hugging Face export
"""

import sys


def fail(message: object) -> int:
    """Say `error: MESSAGE` on stderr; returns 2, the status of a command whose input the user must fix."""
    print(f"error: {message}", file=sys.stderr)
    return 2
