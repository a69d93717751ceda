"""Lexical search with BM25 (`bm25s`), rebuilt in memory from chunk texts (about 1 s per 50k chunks)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class BM25Index:
    def __init__(self, texts: Sequence[str]) -> None:
        import bm25s

        self._bm25s = bm25s
        self.size = len(texts)
        self._model = bm25s.BM25()
        if texts:
            tokens = bm25s.tokenize(list(texts), stopwords="en", show_progress=False)
            self._model.index(tokens, show_progress=False)

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every chunk for `query` (zeros when no query term is in the corpus)."""
        if not self.size:
            return np.zeros(0, dtype=np.float32)
        terms = self._bm25s.tokenize([query], stopwords="en", return_ids=False, show_progress=False)[0]
        if not terms:
            return np.zeros(self.size, dtype=np.float32)
        return np.asarray(self._model.get_scores(terms), dtype=np.float32)

    def search(self, query: str, k: int) -> list[tuple[int, float]]:
        """Top-k (chunk index, score), best first; chunks that share no term with the query are left out."""
        s = self.scores(query)
        return [(i, float(s[i])) for i in top_k(s, k) if s[i] > 0]


def top_k(scores: np.ndarray, k: int) -> list[int]:
    """Indices of the k highest scores, best first; ties broken by index so results are deterministic."""
    if k <= 0 or scores.size == 0:
        return []
    k = min(k, scores.size)
    # lexsort: last key is primary -> by -score, then by index
    order = np.lexsort((np.arange(scores.size), -scores))
    return [int(i) for i in order[:k]]
