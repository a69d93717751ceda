"""The retrieval embedder's options, shared by `iba run`, `iba index` and `iba eval-retrieval`: the
--embedder spec and, for `openai:MODEL`, the servers that embed (as --base-url / --endpoints are for
the chat model)."""

from __future__ import annotations

import argparse
from pathlib import Path

from iba.argtypes import positive_float, positive_int

REMOTE = "openai"  # the embedder prefix whose spec takes server settings


def add_embedder_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group(
        "embedder", "the retrieval embedder. openai:MODEL embeds on any OpenAI-compatible /v1/embeddings server "
        "(OpenAI, text-embeddings-inference, vLLM, Ollama, llama.cpp server, `iba serve-embeddings`); its key "
        "comes from $IBA_EMBED_API_KEY, else $OPENAI_API_KEY (a local URL needs none), and is never stored")
    g.add_argument("--embedder", default="minilm", metavar="SPEC",
                   help="minilm (default: all-MiniLM-L6-v2, packaged, offline), all-mpnet-base-v2, bge-m3, or "
                   "openai:MODEL, with options as 'openai:MODEL?dimensions=256&batch=64&max_batch_tokens=8000' "
                   "(batch: inputs per request, default 32; halved by itself when a server refuses a request "
                   "as too big)")
    g.add_argument("--embed-base-url", action="append", default=None, metavar="URL",
                   help="server URL of an openai: embedder (default: $IBA_EMBED_BASE_URL, else $OPENAI_BASE_URL, "
                   "else OpenAI); repeat it for replicas: requests go to the least busy one, a failing one is "
                   "avoided (docs/scaling.md)")
    g.add_argument("--embed-endpoints", type=Path, default=None, metavar="FILE",
                   help="more server URLs of an openai: embedder, one per line (# starts a comment)")
    g.add_argument("--embed-max-in-flight-per-endpoint", type=positive_int, default=None, metavar="N",
                   help="embedding requests in flight at once to one URL, per process (default 4)")
    g.add_argument("--embed-timeout", type=positive_float, default=None, metavar="SECONDS",
                   help="seconds one embedding request may take before it is retried (default 120)")


def is_remote(spec: str) -> bool:
    """Whether the spec embeds on servers (openai:MODEL) rather than in this process."""
    from iba.retrieval.embed import parse_spec

    return parse_spec(spec)[0] == REMOTE


def embedder_from_args(args: argparse.Namespace) -> str:
    """The --embedder spec, checked, with its server settings when it is openai:MODEL (an EmbedderSpec,
    whose settings travel to pool processes and Ray workers but never into a record). No request is
    sent. Raises ValueError naming the option (or the endpoints file and line)."""
    from iba.llm.endpoints import read_endpoints_file
    from iba.retrieval.embed import EmbedderSpec, embedder_problem, get_embedder

    spec = args.embedder
    problem = embedder_problem(spec)
    if problem:
        raise ValueError(f"argument --embedder: {problem}")
    flags = {"--embed-base-url": getattr(args, "embed_base_url", None),
             "--embed-endpoints": getattr(args, "embed_endpoints", None),
             "--embed-max-in-flight-per-endpoint": getattr(args, "embed_max_in_flight_per_endpoint", None),
             "--embed-timeout": getattr(args, "embed_timeout", None)}
    if not is_remote(spec):
        given = [flag for flag, value in flags.items() if value]
        if given:
            raise ValueError(f"argument {given[0]}: only with --embedder openai:MODEL (the embedder is {spec!r})")
        return spec
    urls = list(flags["--embed-base-url"] or [])
    if flags["--embed-endpoints"] is not None:
        urls += read_endpoints_file(flags["--embed-endpoints"])
    full = EmbedderSpec(spec, base_url=urls or None, timeout=flags["--embed-timeout"],
                        max_in_flight_per_endpoint=flags["--embed-max-in-flight-per-endpoint"])
    get_embedder(full)  # URLs, options and the key checked here (EmbeddingConfigError is a ValueError)
    return full
