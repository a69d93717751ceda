import numpy as np

from iba.retrieval.bm25 import BM25Index, top_k
from iba.retrieval.hybrid import rrf
from iba.retrieval.vector import VectorIndex


def test_bm25_ranks_lexical_matches_and_skips_non_matches():
    idx = BM25Index(["I love spicy sichuan food", "the weather is nice today", "spicy spicy ramen again"])
    hits = idx.search("spicy food", k=5)
    assert [i for i, _ in hits][:1] == [0]
    assert {i for i, _ in hits} == {0, 2}  # doc 1 shares no term: left out
    assert idx.search("zebra", k=3) == []
    assert BM25Index([]).search("anything", 3) == []


def test_top_k_deterministic_ties():
    assert top_k(np.array([0.5, 0.9, 0.5, 0.9]), 3) == [1, 3, 0]
    assert top_k(np.array([1.0]), 5) == [0]
    assert top_k(np.array([]), 3) == []


def test_rrf_formula_and_order():
    fused = dict(rrf([["a", "b", "c"], ["b", "c"]], k=60))
    assert fused["b"] == 1 / 62 + 1 / 61
    assert fused["a"] == 1 / 61
    assert [x for x, _ in rrf([["a", "b", "c"], ["b", "c"]], k=60)] == ["b", "c", "a"]


def test_vector_search_is_cosine_top_k():
    vecs = np.eye(4, dtype=np.float32)
    idx = VectorIndex(vecs)
    q = np.array([0.1, 0.9, 0.0, 0.4], dtype=np.float32)
    assert [i for i, _ in idx.search(q, 2)] == [1, 3]
