"""`inspect eval iba/iba_bench` from the command line, found through the package's entry point, against
a real llama_cpp.server with SmolLM2 (slow)."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from importlib.metadata import entry_points
from pathlib import Path

import pytest

pytest.importorskip("inspect_ai")

from iba.construct.builder import build_dataset  # noqa: E402

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def check_entry_point() -> None:
    """`make install` (pip install -e) registers pyproject.toml's `inspect_ai` entry point; the CLI below
    finds the task only through it."""
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]["inspect_ai"]
    assert declared == {"iba": "iba.inspect._registry"}
    found = {ep.name: ep.value for ep in entry_points(group="inspect_ai")}
    assert found.get("iba") == declared["iba"], f"entry point not installed ({found}); run `make install`"


def test_inspect_eval_cli_on_llama_server(tmp_path, llama_server):
    ds = tmp_path / "ds"
    build_dataset(ds, preset="demo", seed=42, progress=False)
    check_entry_point()
    # PYTHONPATH is left as it is: with src/ on it, inspect would meet the build's src/iba.egg-info
    # before the editable install's dist-info, take iba for a loose module and register the task
    # as plain `iba_bench`, so `iba/iba_bench` would not resolve
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "PYTHONPATH")}
    env["LLAMA_CPP_PYTHON_BASE_URL"] = llama_server
    cmd = [sys.executable, "-m", "inspect_ai", "eval", "iba/iba_bench", "-T", f"dataset={ds}", "-T", "limit=2",
           "-T", "agent=rag?max_tokens=48", "-T", "json_mode=json_object", "-T", f"cache_dir={tmp_path / 'cache'}",
           "--model", "llama-cpp-python/smollm2", "--log-dir", str(tmp_path / "logs"), "--display", "plain",
           "--max-retries", "2"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    from inspect_ai.log import list_eval_logs, read_eval_log

    (info,) = list_eval_logs(str(tmp_path / "logs"))
    log = read_eval_log(info)
    assert log.status == "success" and log.eval.task == "iba/iba_bench"
    assert len(log.samples) == 2 and all(s.error is None for s in log.samples)
    scores = {k for s in log.samples for k in (s.scores or {})}
    assert scores == {"iba_slots", "iba_verifiers", "iba_judge"}
    judged = [s.scores["iba_judge"] for s in log.samples if "iba_judge" in s.scores]
    assert judged and judged[0].metadata["verdicts"]  # grammar-constrained JSON: the judge's replies parsed
    assert all(v["passed"] is not None for v in judged[0].metadata["verdicts"])
    rec = next(s.store["iba_record"] for s in log.samples)
    assert rec["model"] == "inspect:llama-cpp-python/smollm2" and rec["status"] in ("ok", "failed")
