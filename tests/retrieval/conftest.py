import pytest


@pytest.fixture(scope="session")
def minilm():
    """The packaged all-MiniLM-L6-v2 in numpy (skips with the install command if absent)."""
    from iba.retrieval.embed import get_embedder

    try:
        return get_embedder("minilm")
    except RuntimeError as e:
        pytest.skip(str(e))


@pytest.fixture(scope="session")
def minilm_numpy(minilm):
    """The same model on the numpy engine (the fallback when onnxruntime is not installed)."""
    from iba.retrieval.minilm import MiniLMEmbedder

    return MiniLMEmbedder(engine="numpy")
