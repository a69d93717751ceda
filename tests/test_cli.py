import argparse
import subprocess
import sys
import types

import pytest

from iba import cli
from iba.cli import main
from iba.dataset import DatasetError
from iba.argtypes import positive_float, positive_int


def test_run_help_shows_default_model():
    out = subprocess.run([sys.executable, "-m", "iba.cli", "run", "--help"], capture_output=True, text=True)
    assert out.returncode == 0
    assert "local:qwen2.5-coder-0.5b" in out.stdout
    assert "--call-timeout" in out.stdout  # long prompts on the embedded model need more than a default HTTP timeout


def test_top_level_help_lists_commands(capsys):
    assert main([]) == 2
    out = capsys.readouterr().out
    for cmd in ("build", "run", "score", "report", "eval-retrieval", "import", "demo"):
        assert cmd in out


def test_bad_dataset_line_is_reported(tmp_path, capsys):
    from tests.run.helpers import tiny_dataset

    root = tiny_dataset(tmp_path / "ds")
    p = root / "instances.jsonl"
    p.write_text(p.read_text().replace('"query"', '"qeury"', 1))
    assert main(["run", str(root), "--model", "local:smollm2-135m"]) == 2
    assert "instances.jsonl:1" in capsys.readouterr().err


def test_unknown_model_string_lists_forms(tmp_path, capsys):
    from tests.run.helpers import tiny_dataset

    root = tiny_dataset(tmp_path / "ds")
    assert main(["run", str(root), "--model", "gpt4"]) == 2
    err = capsys.readouterr().err
    assert "local:qwen2.5-coder-0.5b" in err and "openai:" in err


def _fake_command(monkeypatch, exc: Exception) -> None:
    mod = types.ModuleType("tests._fake_cmd")
    mod.add_arguments = lambda p: None

    def run(args):
        raise exc

    mod.main = run
    monkeypatch.setitem(sys.modules, "tests._fake_cmd", mod)
    monkeypatch.setitem(cli.COMMANDS, "fake", ("tests._fake_cmd", "raises"))


def test_dataset_error_from_any_command_is_a_message(monkeypatch, capsys):
    _fake_command(monkeypatch, DatasetError("data/histories/u1.jsonl:7: not valid UTF-8"))
    assert main(["fake"]) == 2
    assert capsys.readouterr().err == "error: data/histories/u1.jsonl:7: not valid UTF-8\n"


def test_other_exceptions_are_not_swallowed(monkeypatch):
    """Only the user's data errors become messages; a bug keeps its traceback."""
    _fake_command(monkeypatch, RuntimeError("a bug"))
    with pytest.raises(RuntimeError, match="a bug"):
        main(["fake"])


def test_positive_argument_types():
    assert positive_int("3") == 3 and positive_float("0.5") == 0.5
    for bad, msg in (("0", "must be >= 1, got 0"), ("-2", "must be >= 1, got -2"), ("1.5", "integer >= 1, got '1.5'")):
        with pytest.raises(argparse.ArgumentTypeError, match=msg):
            positive_int(bad)
    for bad in ("0", "-0.1", "inf", "-inf", "nan", "soon"):
        with pytest.raises(argparse.ArgumentTypeError, match="> 0"):
            positive_float(bad)


def test_store_error_from_any_command_is_a_message(monkeypatch, capsys):
    from iba.run.store import StoreError

    _fake_command(monkeypatch, StoreError("runs/: is a folder, not a result store"))
    assert main(["fake"]) == 2
    assert capsys.readouterr().err == "error: runs/: is a folder, not a result store\n"


@pytest.mark.parametrize("argv, option", [
    (["eval-retrieval", "DS", "--k", "0"], "--k"),
    (["eval-retrieval", "DS", "--limit", "-1"], "--limit"),
    (["index", "DS", "--users", "0"], "--users"),
    (["build", "--out", "X", "--personas", "0"], "--personas"),
    (["build", "--out", "X", "--concurrency", "0"], "--concurrency"),
    (["validate", "DS", "--annotators", "a,b", "--sample", "0"], "--sample"),
    (["judge-check", "local:x", "--n", "0"], "--n"),
    (["judge-check", "local:x", "--concurrency", "0"], "--concurrency"),
    (["score", "S", "--dataset", "DS", "--judge-repeats", "0"], "--judge-repeats"),
    (["demo", "--qa-per-instance", "0"], "--qa-per-instance"),
])
def test_counts_are_at_least_one_in_every_command(argv, option, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    assert f"argument {option}: must be >= 1" in capsys.readouterr().err


def test_judge_check_names_its_judge_once(capsys):
    """The judge is judge-check's positional MODEL: it offers no --model to refuse."""
    with pytest.raises(SystemExit) as e:
        main(["judge-check", "local:x", "--model", "local:y"])
    assert e.value.code == 2 and "unrecognized arguments: --model local:y" in capsys.readouterr().err


@pytest.mark.parametrize("command", [["build"], ["report", "STORE"], ["demo"]])
def test_out_that_is_a_file_is_a_one_line_error(tmp_path, command, capsys):
    """`--out EXISTING_FILE` was a FileExistsError traceback (build, report)."""
    f = tmp_path / "a-file"
    f.write_text("x")
    for out in (f, f / "sub"):
        with pytest.raises(SystemExit) as e:
            main([*command, "--out", str(out)])
        assert e.value.code == 2
        err = capsys.readouterr().err
        assert "argument --out:" in err and ("exists and is not a folder" in err or "is a file, not a folder" in err)
        assert "Traceback" not in err
