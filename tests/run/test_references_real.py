"""null and oracle beside rag on the demo build, on the real embedded model (SmolLM2 for speed),
through the CLI: a stratified sample, marked as such, and the reference rows marked as references
in `iba run`'s printout, the report and the submission."""

import json

import pytest

from iba.cli import main
from tests.construct.conftest import demo_dir  # noqa: F401  (a demo build)

pytestmark = pytest.mark.slow


def test_reference_rows_and_a_sample_end_to_end(demo_dir, tmp_path, smollm_gguf, capsys):
    store, out, sub = tmp_path / "runs.sqlite", tmp_path / "report", tmp_path / "sub.json"
    # the demo's daily domain: 3 call_api instances (slot scores need no judge); a sample of 2
    args = ["run", str(demo_dir), "--model", "local:smollm2-135m", "--store", str(store), "--no-cache",
            "--cache-dir", str(tmp_path / "cache"), "--quiet", "--judges", "none", "--domain", "daily",
            "--sample", "2", "--sample-seed", "1",
            "--agent", "oracle?max_tokens=64", "--agent", "rag?max_tokens=64", "--agent", "null?max_tokens=64"]
    assert main(args) in (0, 1)
    printed = capsys.readouterr().out
    assert "6 planned" in printed
    assert "sample: a stratified sample of 2 of 3 instances (domain daily), seed 1" in printed
    assert "systems: rag?max_tokens=64" in printed
    assert "references (not systems; marked as such in reports and submissions): oracle?max_tokens=64 " \
           "[gold evidence], null?max_tokens=64 [no history]" in printed

    assert main(["report", str(store), "--dataset", str(demo_dir), "--out", str(out)]) == 0
    table4 = (out / "table4.md").read_text()
    labels = [line.split(" | ")[0].lstrip("| ") for line in table4.splitlines() if "local:smollm2-135m" in line]
    assert labels == ["null?max_tokens=64 (local:smollm2-135m) [reference: no history]",
                      "rag?max_tokens=64 (local:smollm2-135m)",
                      "oracle?max_tokens=64 (local:smollm2-135m) [reference: gold evidence]"]
    assert "a stratified sample of 2 of 3 instances" in table4
    refs = (out / "references.md").read_text()
    assert "| rag?max_tokens=64 (local:smollm2-135m) | 2 |" in refs
    assert "**Sample:**" in (out / "report.md").read_text()

    assert main(["submit", "prepare", str(store), "--dataset", str(demo_dir), "--out", str(sub)]) == 0
    obj = json.loads(sub.read_text())
    assert [(e["agent"].partition("?")[0], e["reference"], e["reference_kind"]) for e in obj["entries"]] == [
        ("null", True, "null"), ("rag", False, None), ("oracle", True, "oracle")]
    assert obj["sample"]["n"] == 2 and obj["sample"]["seed"] == 1 and obj["sample"]["filters"] == {"domain": ["daily"]}
    assert main(["submit", "validate", str(sub), "--dataset", str(demo_dir)]) == 0
