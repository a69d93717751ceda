"""Built datasets shared by the build tests (each build takes a second or two)."""

from __future__ import annotations

import pytest

from iba.construct.builder import build_dataset
from iba.dataset import Dataset


@pytest.fixture(scope="session")
def demo_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo")
    build_dataset(out, preset="demo", seed=42, progress=False)
    return out


@pytest.fixture(scope="session")
def small_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("small")
    build_dataset(out, preset="small", seed=7, progress=False)
    return out


@pytest.fixture(scope="session")
def demo(demo_dir):
    return Dataset(demo_dir)


@pytest.fixture(scope="session")
def small(small_dir):
    return Dataset(small_dir)
