"""Dense search over one history's chunk vectors: exact inner product in numpy (faiss when asked).

A user's history is a few thousand chunks at most, where a numpy matmul on one BLAS thread takes well
under a millisecond (one_blas_thread); faiss (`iba[faiss]`) is an option for very long histories.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np

from iba.retrieval.bm25 import top_k

_blas: Any = None  # threadpoolctl's controller, made once (it inspects the loaded libraries)
_blas_lock = threading.Lock()


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """BLAS on one thread for the duration (threadpoolctl: process-wide, restored after).

    Retrieval's matmuls are small (a few queries against a few thousand vectors), where BLAS threads
    cost more than they save: on a busy 2-core machine one query against 3,552 vectors took 8 ms of CPU
    on the default threads and 0.3 ms on one (bench/BENCHMARKS.md, issue 33); the embedder's own
    batches run under it too, for the same reason (threads that cannot get a core spin)."""
    global _blas
    with _blas_lock:
        if _blas is None:
            try:
                from threadpoolctl import ThreadpoolController
            except ImportError:  # pragma: no cover - a dependency; degrade to the BLAS default
                _blas = False
            else:
                _blas = ThreadpoolController()
    if not _blas:
        yield
        return
    with _blas.limit(limits=1, user_api="blas"):
        yield


class VectorIndex:
    def __init__(self, vectors: np.ndarray, use_faiss: bool = False) -> None:
        self.vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        self._faiss = None
        if use_faiss and len(self.vectors):
            try:
                import faiss
            except ImportError:
                raise RuntimeError("faiss search needs faiss-cpu: pip install 'iba[faiss]'") from None
            self._faiss = faiss.IndexFlatIP(self.vectors.shape[1])
            self._faiss.add(self.vectors)

    def __len__(self) -> int:
        return len(self.vectors)

    def scores(self, query_vec: np.ndarray) -> np.ndarray:
        """Cosine similarity of every chunk to a unit query vector."""
        if not len(self.vectors):
            return np.zeros(0, dtype=np.float32)
        with one_blas_thread():
            return self.vectors @ query_vec.astype(np.float32)

    def search(self, query_vec: np.ndarray, k: int) -> list[tuple[int, float]]:
        if self._faiss is not None:
            k = min(k, len(self.vectors))
            scores, ids = self._faiss.search(query_vec.reshape(1, -1).astype(np.float32), k)
            return [(int(i), float(s)) for i, s in zip(ids[0], scores[0]) if i >= 0]
        s = self.scores(query_vec)
        return [(i, float(s[i])) for i in top_k(s, k)]
