"""The model options every command that calls a model shares (run, demo, score, judge-check, batch,
build, validate, eval-retrieval): one option group, one default cache location (.iba-cache, for
model responses and retrieval indexes alike), and how they become a backend (backend_from_args).
README "Model options" documents them once; embedder_options.py is the same for --embedder.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from iba.argtypes import positive_float, positive_int
from iba.llm import DEFAULT_MODEL

DEFAULT_CACHE_DIR = Path(".iba-cache")

# The one judge default of every command that judges (iba run, iba score, iba demo): the model that
# acted judges its own text unless --judges names others. Said once, here, and shown by each --help.
JUDGES_DEFAULT = "same"
JUDGES_HELP = ("comma-separated judge model strings for Generate(text) checkpoints. 'same' (the default, in every "
               "command that judges) = the model the run used (--model); 'best' = the strongest packaged model "
               "installed (local:qwen2.5-coder-1.5b, else the 0.5B); 'none' = verifiers and slot matching only. No "
               "small local model is a reliable judge (`iba judge-check`): judge on a real server for figures you "
               "report")


def add_backend_arguments(p: argparse.ArgumentParser | argparse._ArgumentGroup, *, model: bool = True,
                          model_default: str | None = DEFAULT_MODEL, model_help: str = "") -> None:
    """The option group of every command that calls a model: --model (model=False: the command names
    its models otherwise, as judge-check's positional MODEL and validate's --annotators), servers,
    in-flight bounds, the response cache, the context window and the call timeout."""
    if model:
        default = f"default: {model_default}" if model_default else "no default"
        p.add_argument(
            "--model", default=model_default,
            help=f"{model_help}model string ({default}). Forms: local:qwen2.5-coder-0.5b, "
            "local:qwen2.5-coder-1.5b, local:smollm2-135m, local:/path/model.gguf (embedded llama.cpp), "
            "openai:<model> (any OpenAI-compatible server: vLLM, Ollama, llama.cpp server, OpenAI...; "
            "key from OPENAI_API_KEY)",
        )
    p.add_argument("--base-url", action="append", default=None, metavar="URL",
                   help="server URL for openai: models (default: $OPENAI_BASE_URL); repeat it for replicas of "
                   "the model: requests go to the least busy one, a failing one is avoided (docs/scaling.md)")
    p.add_argument("--endpoints", type=Path, default=None, metavar="FILE",
                   help="more server URLs for openai: models, one per line (# starts a comment)")
    p.add_argument("--judge-base-url", action="append", default=None, metavar="URL",
                   help="server URL for openai: judge models of --judges (repeatable; default: those of "
                   "--base-url / --endpoints), e.g. to judge on other servers than the agent's")
    p.add_argument("--max-in-flight-per-endpoint", type=positive_int, default=None, metavar="N",
                   help="openai: requests in flight at once to one server URL (default 32)")
    p.add_argument("--max-in-flight", type=positive_int, default=None, metavar="N",
                   help="openai: requests in flight at once over all URLs of one model (default: no bound "
                   "beyond the per-URL one)")
    p.add_argument("--no-cache", action="store_true", help="do not read or write the on-disk LLM response cache")
    p.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE_DIR,
                   help="LLM response cache and retrieval index cache (default: .iba-cache)")
    p.add_argument("--context-window", type=positive_int, default=None, metavar="TOKENS",
                   help="the model's context window (default 8192): what direct, the full-context row, fills with "
                   "the most recent turns, and what the agents' prompt budgets assume; for local: models, the "
                   "llama.cpp context it loads with (memory grows with it). Say what your server serves, e.g. 131072")
    p.add_argument("--call-timeout", type=positive_float, default=600.0,
                   help="seconds one model call may take (default 600: an 8k-token prompt on the embedded "
                   "0.5B model takes minutes on 2 cores); a call past it is errored, not retried, on local models")


def backend_from_args(model: str, args: argparse.Namespace, *, judge: bool = False, sends: bool = True):
    """The backend for `model` with the options of add_backend_arguments (servers, cache, call
    timeout, in-flight bounds); judge=True: a judge model, on --judge-base-url if given.

    Server URLs: --base-url (repeatable) then those of --endpoints FILE. Commands with their own
    options (`iba score`) may lack some of these: absent means unset. A bad endpoints file is a
    ValueError naming file:line."""
    from iba.llm import resolve_backend

    return resolve_backend(model, **backend_options(args, judge=judge), sends=sends)


def backend_options(args: argparse.Namespace, *, judge: bool = False) -> dict:
    """backend_from_args's keyword arguments for resolve_backend: plain values, so a Ray worker can
    build the same backend itself (`iba run --executor ray`)."""
    from iba.llm.endpoints import read_endpoints_file

    def as_list(value) -> list[str]:
        return [value] if isinstance(value, str) else list(value or [])

    if judge and getattr(args, "judge_base_url", None):
        urls = as_list(args.judge_base_url)
    else:
        urls = as_list(getattr(args, "base_url", None))
        if getattr(args, "endpoints", None) is not None:
            urls += read_endpoints_file(args.endpoints)
    return dict(base_url=urls or None, cache_dir=args.cache_dir, use_cache=not args.no_cache,
                timeout=args.call_timeout, n_ctx=getattr(args, "context_window", None),
                max_in_flight_per_endpoint=getattr(args, "max_in_flight_per_endpoint", None),
                max_in_flight=getattr(args, "max_in_flight", None))
