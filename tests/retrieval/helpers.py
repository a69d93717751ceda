"""Small histories and a cheap deterministic embedder for retrieval unit tests (tests only)."""

from __future__ import annotations

import hashlib
import re

import numpy as np

from iba.retrieval.embed import Embedder
from iba.types import Turn


def make_history(texts: list[tuple[str, str]], user: str = "u1", per_session: int = 4) -> list[Turn]:
    """Turns from (role, text) pairs, a new session every `per_session` turns, one day apart."""
    turns = []
    for i, (role, text) in enumerate(texts):
        s = i // per_session
        turns.append(
            Turn(
                id=f"{user}-s{s:03d}-t{i % per_session:02d}",
                session_id=f"{user}-s{s:03d}",
                timestamp=f"2025-{1 + s // 28:02d}-{1 + s % 28:02d}T10:{i % 60:02d}:00+00:00",
                role=role,  # type: ignore[arg-type]
                text=text,
            )
        )
    return turns


def word_spans(text: str) -> list[tuple[int, int]]:
    return [m.span() for m in re.finditer(r"\S+", text)]


class HashEmbedder(Embedder):
    """Bag-of-words hashed into 64 dims: fast and deterministic, enough to test plumbing."""

    name = "test-hash"
    dim = 64
    max_seq_len = 256

    def _encode(self, texts, batch_size):
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in re.findall(r"\w+", t.lower()):
                out[i, int(hashlib.md5(w.encode()).hexdigest(), 16) % self.dim] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.maximum(norms, 1e-9)

    def token_spans(self, text):
        return word_spans(text)
