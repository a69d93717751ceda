"""Dense search over one history's chunk vectors: exact inner product in numpy (faiss when asked).

A user's history is a few thousand chunks at most, where a numpy matmul takes well under a
millisecond; faiss (`iba[faiss]`) is an option for very long histories.
"""

from __future__ import annotations

import numpy as np

from iba.retrieval.bm25 import top_k


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
        return self.vectors @ query_vec.astype(np.float32)

    def search(self, query_vec: np.ndarray, k: int) -> list[tuple[int, float]]:
        if self._faiss is not None:
            k = min(k, len(self.vectors))
            scores, ids = self._faiss.search(query_vec.reshape(1, -1).astype(np.float32), k)
            return [(int(i), float(s)) for i, s in zip(ids[0], scores[0]) if i >= 0]
        s = self.scores(query_vec)
        return [(i, float(s[i])) for i in top_k(s, k)]
