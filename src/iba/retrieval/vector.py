"""Dense search over one history's chunk vectors: exact inner product in numpy.

A user's history is a few thousand chunks at most, where a numpy matmul on one BLAS thread takes well
under a millisecond (one_blas_thread): no approximate index is needed.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np

from iba.retrieval.bm25 import top_k

_blas: Any = None  # threadpoolctl's controller (a dependency), made once (it inspects the loaded libraries)
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
            from threadpoolctl import ThreadpoolController

            _blas = ThreadpoolController()
    with _blas.limit(limits=1, user_api="blas"):
        yield


class VectorIndex:
    def __init__(self, vectors: np.ndarray) -> None:
        self.vectors = np.ascontiguousarray(vectors, dtype=np.float32)

    def __len__(self) -> int:
        return len(self.vectors)

    def scores(self, query_vec: np.ndarray) -> np.ndarray:
        """Cosine similarity of every chunk to a unit query vector."""
        if not len(self.vectors):
            return np.zeros(0, dtype=np.float32)
        with one_blas_thread():
            return self.vectors @ query_vec.astype(np.float32)

    def search(self, query_vec: np.ndarray, k: int) -> list[tuple[int, float]]:
        s = self.scores(query_vec)
        return [(i, float(s[i])) for i in top_k(s, k)]
