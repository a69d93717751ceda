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


def entry_point_path(tmp_path: Path) -> list[str]:
    """Where Python finds the `inspect_ai` entry point this checkout declares. An `make install`
    (pip install -e) registers it; an environment installed from an older checkout lacks it, so the
    test declares pyproject.toml's own entry in a throwaway dist-info on the path."""
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]["inspect_ai"]
    assert declared == {"iba": "iba.inspect._registry"}
    if any(ep.name == "iba" and ep.value == declared["iba"] for ep in entry_points(group="inspect_ai")):
        return []
    info = tmp_path / "ep" / "iba_entry_points-0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: iba-entry-points\nVersion: 0\n")
    (info / "entry_points.txt").write_text("[inspect_ai]\n" + "".join(f"{k} = {v}\n" for k, v in declared.items()))
    return [str(tmp_path / "ep")]


def test_inspect_eval_cli_on_llama_server(tmp_path, llama_server):
    ds = tmp_path / "ds"
    build_dataset(ds, preset="demo", seed=42, progress=False)
    extra = entry_point_path(tmp_path)
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
    env["PYTHONPATH"] = os.pathsep.join([*extra, str(ROOT / "src"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
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
