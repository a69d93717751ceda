"""Every command that calls a model takes the one option group, with one default cache location."""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path

import pytest

from iba.commands.model_options import DEFAULT_CACHE_DIR, backend_options

# command -> the arguments it needs besides the model options
CALLERS = {
    "run": ["DS"], "demo": [], "score": ["STORE", "--dataset", "DS"], "judge-check": ["local:x"],
    "build": ["--out", "OUT"], "validate": ["DS", "--annotators", "a,b"], "eval-retrieval": ["DS"],
}


def _parser(command: str) -> argparse.ArgumentParser:
    from iba.cli import COMMANDS

    p = argparse.ArgumentParser()
    importlib.import_module(COMMANDS[command][0]).add_arguments(p)
    return p


@pytest.mark.parametrize("command", sorted(CALLERS))
def test_the_same_endpoint_and_cache_options_everywhere(command, tmp_path):
    endpoints = tmp_path / "endpoints.txt"
    endpoints.write_text("http://127.0.0.1:8003/v1\n")
    p = _parser(command)
    defaults = p.parse_args(CALLERS[command])
    assert defaults.cache_dir == DEFAULT_CACHE_DIR == Path(".iba-cache") and defaults.no_cache is False
    args = p.parse_args([*CALLERS[command], "--base-url", "http://127.0.0.1:8001/v1", "--base-url",
                         "http://127.0.0.1:8002/v1", "--endpoints", str(endpoints), "--call-timeout", "5",
                         "--cache-dir", str(tmp_path / "c"), "--max-in-flight-per-endpoint", "2"])
    opts = backend_options(args)
    assert opts["base_url"] == ["http://127.0.0.1:8001/v1", "http://127.0.0.1:8002/v1", "http://127.0.0.1:8003/v1"]
    assert opts["timeout"] == 5 and opts["cache_dir"] == tmp_path / "c" and opts["max_in_flight_per_endpoint"] == 2
