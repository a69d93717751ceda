"""The llama.cpp thread count (no model loaded: fast)."""

from __future__ import annotations

import pytest


def test_llama_threads_env_is_honoured_and_checked(monkeypatch):
    from iba.llm.llama_cpp import default_threads

    monkeypatch.delenv("IBA_LLAMA_THREADS", raising=False)
    fallback = default_threads()
    assert fallback >= 1
    monkeypatch.setenv("IBA_LLAMA_THREADS", str(fallback + 3))
    assert default_threads() == fallback + 3
    for bad in ("0", "-2", "two"):
        monkeypatch.setenv("IBA_LLAMA_THREADS", bad)
        with pytest.raises(ValueError, match="IBA_LLAMA_THREADS"):
            default_threads()
