import subprocess
import sys

from iba.cli import main


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
