"""`iba build`, `iba validate`: arguments and error messages."""

from __future__ import annotations

import json

import pytest

from iba.cli import main as iba_main


def test_build_cli_writes_a_dataset_and_prints_table2(tmp_path, capsys):
    out = tmp_path / "d"
    assert iba_main(["build", "--preset", "demo", "--out", str(out), "--seed", "3", "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "Overall" in printed and "wrote" in printed
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["seed"] == 3 and manifest["params"]["preset"] == "demo" and manifest["counts"]["instances"] == 6
    assert manifest["params"]["generator_version"] == 3


def test_build_cli_builds_generator_2_on_request(tmp_path, capsys):
    out = tmp_path / "v2"
    assert iba_main(["build", "--preset", "demo", "--out", str(out), "--generator", "2", "--personas", "1", "--no-progress"]) == 0
    assert json.loads((out / "manifest.json").read_text())["params"]["generator_version"] == 2
    with pytest.raises(SystemExit):  # argparse: only the versions there are
        iba_main(["build", "--out", str(out), "--generator", "1"])
    assert "invalid choice: 1 (choose from 2, 3)" in capsys.readouterr().err


def test_build_cli_errors_say_what_to_fix(tmp_path, capsys):
    assert iba_main(["build", "--out", str(tmp_path), "--writer", "llm"]) == 2
    assert "--writer llm needs --model" in capsys.readouterr().err
    assert iba_main(["build", "--out", str(tmp_path), "--writer", "llm", "--model", "nonsense"]) == 2
    assert "valid forms" in capsys.readouterr().err
    assert iba_main(["build", "--out", str(tmp_path), "--noise-ratio", "0", "--no-progress"]) == 2
    assert "noise ratio must be >= 1" in capsys.readouterr().err


def test_validate_cli_needs_two_annotators(demo_dir, capsys):
    assert iba_main(["validate", str(demo_dir), "--annotators", "local:smollm2-135m"]) == 2
    assert "at least two" in capsys.readouterr().err
