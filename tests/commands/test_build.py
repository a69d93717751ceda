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


def _answer_round(batch, tmp_path, n: int) -> int:
    """Answer every awaiting request of `batch` as a provider would, by the scripted writer of
    tests/construct/test_llm_writer.py; `iba batch import` stores them."""
    from iba.batch.folder import BatchFolder
    from iba.batch.lines import ResultLine, ResultResponse, call_params, completion_body
    from iba.llm.base import Completion
    from tests.construct.test_llm_writer import good_responder

    folder = BatchFolder(batch)
    lines = []
    for cid in folder.awaiting():
        body = folder.requests[cid].body
        p = call_params(body)
        text = json.dumps(good_responder(p.messages, {"json_schema": p.json_schema}))
        comp = Completion(text=text, prompt_tokens=100, completion_tokens=len(text) // 4)
        lines.append(ResultLine(custom_id=cid, response=ResultResponse(status_code=200, body=completion_body(comp, body["model"]))))
    path = tmp_path / f"results-{n}.jsonl"
    path.write_text("".join(x.model_dump_json() + "\n" for x in lines), encoding="utf-8")
    assert iba_main(["batch", "import", str(batch), str(path)]) == 0
    return len(lines)


def test_build_cli_batch_rounds_until_done(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # a batch build sends nothing: no key needed
    out, batch = tmp_path / "d", tmp_path / "batch"
    cmd = ["build", "--preset", "demo", "--seed", "5", "--history-turns", "24", "--out", str(out), "--writer", "llm",
           "--model", "openai:gpt-4o-mini", "--llm-scope", "exchanges", "--batch", str(batch), "--no-progress"]
    statuses = []
    for n in range(6):
        statuses.append(iba_main(cmd))
        if statuses[-1] != 3:
            break
        captured = capsys.readouterr()
        assert "request(s) written to" in captured.out and "iba batch submit" in captured.err
        assert not (out / "manifest.json").exists()
        assert _answer_round(batch, tmp_path, n) > 0
    assert statuses == [3, 3, 3, 0]  # user turns, checks, replies; then the dataset
    assert json.loads((out / "manifest.json").read_text())["params"]["llm_scope"] == "exchanges"
    rounds = sorted(p.name for p in batch.glob("round-*"))
    assert rounds == ["round-0001", "round-0002", "round-0003"]
    assert sorted(f.name for f in batch.glob("round-*/*")) == ["openai_gpt-4o-mini.requests.jsonl"] * 3  # one model
    assert iba_main(["batch", "status", str(batch)]) == 0
    assert "0 awaiting" in capsys.readouterr().out


def test_build_cli_batch_errors(tmp_path, capsys):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x.txt").write_text("not a batch folder")
    cmd = ["build", "--out", str(tmp_path / "d"), "--writer", "llm", "--model", "openai:m", "--no-progress"]
    assert iba_main([*cmd, "--batch", str(tmp_path / "full")]) == 2
    assert "is not empty and is not a batch folder" in capsys.readouterr().err
    assert iba_main(["build", "--out", str(tmp_path / "p"), "--batch", str(tmp_path / "b"), "--no-progress"]) == 0
    assert "--batch is only used with --writer llm" in capsys.readouterr().err
    assert not (tmp_path / "b").exists()
