"""Sentence embedders: the interface, and the lookup by registry name.

Every embedder returns float32 rows of unit length, so a dot product is the cosine. The
implementations (minilm, st_embedders, openai_embedder: docs/ARCHITECTURE.md) live each in its
module; the registry names them and nothing here imports them.

A name with a prefix (`openai:<model>`) resolves the prefix and hands the factory the rest, as model
strings do for backends. An EmbedderSpec is such a name plus the settings that reach its servers.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

import numpy as np

from iba import registry


class Embedder(ABC):
    """Maps texts to unit vectors. `encode_calls`/`encoded_texts` count work (cache tests use them)."""

    name: str
    dim: int
    max_seq_len: int

    def __init__(self) -> None:
        self.encode_calls = 0
        self.encoded_texts = 0

    def encode(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        """(len(texts), dim) float32, L2-normalised."""
        self.encode_calls += 1
        self.encoded_texts += len(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self._encode(list(texts), batch_size)

    @abstractmethod
    def _encode(self, texts: list[str], batch_size: int) -> np.ndarray: ...

    @abstractmethod
    def token_spans(self, text: str) -> list[tuple[int, int]]:
        """Character spans of the model's tokens in `text` (no special tokens); chunking counts these."""


def normalise(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (float32)."""
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return (x / np.maximum(norms, 1e-12)).astype(np.float32)


class EmbedderSpec(str):
    """An --embedder string that also carries how to reach its servers.

    The string is the spec as typed (`openai:text-embedding-3-small`): what traces, messages and the
    index cache's key see. `settings` are the keyword arguments its factory gets besides the spec's own
    options, and are not part of its identity: server URLs (which may hold credentials), timeouts,
    in-flight bounds. It pickles with them, so a pool process or a Ray worker builds its own client from
    the same settings (never a live client); JSON and pydantic see only the string."""

    settings: dict[str, Any]

    def __new__(cls, spec: str, **settings: Any) -> EmbedderSpec:
        obj = super().__new__(cls, spec)
        obj.settings = {k: v for k, v in settings.items() if v is not None}
        return obj

    def __reduce__(self) -> tuple:
        return (_rebuild_spec, (str(self), self.settings))

    def __repr__(self) -> str:  # the settings may hold URLs with credentials: never shown
        return f"EmbedderSpec({str(self)!r})"


def _rebuild_spec(spec: str, settings: dict[str, Any]) -> EmbedderSpec:
    return EmbedderSpec(spec, **settings)


def parse_spec(name: str) -> tuple[str, str | None, dict[str, str]]:
    """(registry name, the rest after a prefix or None, the `?k=v&...` options) of an embedder spec:
    `minilm` -> ("minilm", None, {}); `openai:m?dimensions=256` -> ("openai", "m", {"dimensions": "256"})."""
    base, _, query = str(name).partition("?")
    options = dict(part.split("=", 1) for part in query.split("&") if "=" in part)
    prefix, sep, rest = base.partition(":")
    if sep:
        return prefix, rest, options
    return base, None, options


def embedder_problem(name: str) -> str | None:
    """Why `name` names no embedder (None if it does), with the allowed names: said before a run starts,
    since an unknown embedder would otherwise error every retrieving agent's action."""
    known = registry.names("embedders")
    base, rest, _ = parse_spec(name)
    prefixed = [k for k in known if k in _PREFIXED]
    allowed = ", ".join([k for k in known if k not in _PREFIXED] + [f"{k}:MODEL" for k in prefixed])
    if base not in known:
        return f"unknown embedder {str(name).partition('?')[0]!r} (allowed: {allowed})"
    if base in _PREFIXED and not rest:
        return f"embedder {base!r} needs a model name: {base}:MODEL (e.g. openai:text-embedding-3-small)"
    if base not in _PREFIXED and rest is not None:
        return f"embedder {base!r} takes no ':' part (allowed: {allowed})"
    return None


# registry names whose spec is `name:MODEL` (the factory takes the model as its first argument)
_PREFIXED = frozenset({"openai"})

_CACHE: dict[tuple[str, str], Embedder] = {}
_CACHE_LOCK = threading.Lock()


def get_embedder(name: str = "minilm") -> Embedder:
    """An embedder by registry name, loaded once per process; `bge-m3?path=/dir` passes options,
    `openai:MODEL` a model to the prefix's factory, and an EmbedderSpec its settings as well."""
    settings = dict(getattr(name, "settings", {}) or {})
    key = (str(name), repr(sorted(settings.items())))
    with _CACHE_LOCK:
        if key not in _CACHE:
            base, rest, options = parse_spec(name)
            factory = registry.resolve("embedders", base)
            args = (rest,) if base in _PREFIXED and rest is not None else ()
            _CACHE[key] = factory(*args, **options, **settings)
        return _CACHE[key]
