"""`iba serve-embeddings`: the packaged MiniLM (or any --embedder) behind an OpenAI-compatible
/v1/embeddings endpoint, for `--embedder openai:NAME --embed-base-url URL` on this or other machines
(iba.retrieval.embeddings_server has the protocol)."""

from __future__ import annotations

import argparse
import os
import signal

from iba.argtypes import positive_int
from iba.commands import fail


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.description = (
        "Serve an embedder over the OpenAI embeddings protocol (POST /v1/embeddings, GET /v1/models; "
        "encoding_format float or base64). Clients: `iba run|index|eval-retrieval --embedder openai:NAME "
        "--embed-base-url http://HOST:PORT/v1`, or any OpenAI SDK. Several servers are replicas: give a client "
        "each URL (docs/scaling.md). With $IBA_SERVE_API_KEY set, requests must carry that key as their bearer "
        "token; otherwise there is no authentication, so the default binds 127.0.0.1 only.")
    p.add_argument("--embedder", default="minilm",
                   help="the in-process embedder to serve (default: minilm, the packaged all-MiniLM-L6-v2; "
                   "options as in `iba run --embedder`, e.g. 'minilm?threads=1')")
    p.add_argument("--name", default=None,
                   help="the model name clients ask for (default: the --embedder name without options)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1; 0.0.0.0 for every interface)")
    p.add_argument("--port", type=int, default=8090, help="port (default 8090; 0 picks a free one, printed on start)")
    p.add_argument("--max-inputs", type=positive_int, default=2048, metavar="N",
                   help="inputs per request; more is refused with HTTP 413 (default 2048, OpenAI's limit)")


def main(args: argparse.Namespace) -> int:
    from iba.retrieval.embed import embedder_problem, get_embedder
    from iba.retrieval.embeddings_server import EmbeddingsServer

    problem = embedder_problem(args.embedder)
    if problem:
        return fail(f"argument --embedder: {problem}")
    if not 0 <= args.port <= 65535:
        return fail(f"argument --port: must be 0..65535, got {args.port}")
    try:
        embedder = get_embedder(args.embedder)
        embedder.encode(["warm up"])  # load the weights now: a broken install fails before "serving"
    except (RuntimeError, ValueError) as e:
        return fail(e)
    name = args.name or args.embedder.partition("?")[0]
    try:
        server = EmbeddingsServer(embedder, model=name, host=args.host, port=args.port, max_inputs=args.max_inputs,
                                  api_key=os.environ.get("IBA_SERVE_API_KEY"))
    except OSError as e:
        return fail(f"cannot listen on {args.host}:{args.port}: {e.strerror or e}")
    key = "; key from IBA_SERVE_API_KEY required" if os.environ.get("IBA_SERVE_API_KEY") else ""
    print(f"serving {embedder.name} ({embedder.dim} dimensions) as model {name!r} at {server.url} "
          f"(POST /v1/embeddings, GET /v1/models{key}); Ctrl-C stops", flush=True)
    # a SIGTERM (a supervisor, a test) stops as Ctrl-C does: the socket is closed and the counts printed
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
    print(f"stopped after {server.requests} requests, {server.inputs} inputs, {server.tokens} tokens", flush=True)
    return 0


def _interrupt(*_: object) -> None:
    raise KeyboardInterrupt
