"""Vectors keyed by the exact text embedded, shared by every history, run and process.

The same message recurs across histories (PrefEval's filler conversations in every item; a
builder's recurring noise) and across runs that change only the chunking. The history index cache
(index.py) is keyed by the whole history, so it cannot reuse them; this cache is keyed by text, so
each distinct text is embedded once per embedder. One SQLite file per embedder under
CACHE/vectors/ (WAL: several processes read and write it; a write is one transaction).
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from iba.retrieval.embed import Embedder
from iba.sqlite_wal import enable_wal


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()


class TextVectors:
    """text -> float32 vector for one embedder, on disk."""

    def __init__(self, cache_dir: str | Path, embedder: Embedder) -> None:
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in embedder.name)
        self.path = Path(cache_dir) / "vectors" / f"{safe}-{embedder.dim}.sqlite"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.embedder = embedder
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, timeout=60, check_same_thread=False)
        enable_wal(self._db)
        self._db.execute("CREATE TABLE IF NOT EXISTS vectors (digest BLOB PRIMARY KEY, vector BLOB NOT NULL)")
        self._db.commit()

    def close(self) -> None:
        self._db.close()

    def encode(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        """(len(texts), dim) float32 unit vectors: stored ones read back, the others embedded (each
        distinct text once) and stored."""
        dim = self.embedder.dim
        out = np.zeros((len(texts), dim), dtype=np.float32)
        digests = [_digest(t) for t in texts]
        found = self._get(list(dict.fromkeys(digests)))
        missing: dict[bytes, str] = {}
        for d, t in zip(digests, texts):
            if d not in found:
                missing.setdefault(d, t)
        if missing:
            vecs = self.embedder.encode(list(missing.values()), batch_size)
            new = dict(zip(missing, vecs))
            self._put(new)
            found.update(new)
        for i, d in enumerate(digests):
            out[i] = found[d]
        return out

    def _get(self, digests: list[bytes]) -> dict[bytes, np.ndarray]:
        found: dict[bytes, np.ndarray] = {}
        with self._lock:
            for start in range(0, len(digests), 500):  # under SQLite's bound-parameter limit
                part = digests[start : start + 500]
                rows = self._db.execute(
                    f"SELECT digest, vector FROM vectors WHERE digest IN ({','.join('?' * len(part))})", part
                ).fetchall()
                for d, blob in rows:
                    vec = np.frombuffer(blob, dtype=np.float32)
                    if vec.shape == (self.embedder.dim,):  # a wrong-sized row is re-embedded
                        found[bytes(d)] = vec
        return found

    def _put(self, vectors: dict[bytes, np.ndarray]) -> None:
        with self._lock, self._db:
            self._db.executemany(
                "INSERT OR REPLACE INTO vectors (digest, vector) VALUES (?, ?)",
                [(d, np.ascontiguousarray(v, dtype=np.float32).tobytes()) for d, v in vectors.items()],
            )
