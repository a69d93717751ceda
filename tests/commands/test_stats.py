"""`iba stats` checks a dataset as `iba run` does, with the same messages, before counting anything."""

from __future__ import annotations

import json

from iba.cli import main
from tests.run.helpers import tiny_dataset


def _stats(ds, capsys) -> tuple[int, str]:
    rc = main(["stats", str(ds), "--no-audit", "--json"])
    return rc, capsys.readouterr().err


def test_stats_counts_a_good_dataset(tmp_path, capsys):
    ds = tiny_dataset(tmp_path / "ds")
    assert main(["stats", str(ds), "--no-audit", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["history_turns"] == 3


def test_a_user_id_that_leaves_the_dataset_is_refused(tmp_path, capsys):
    """Before: `../x` was followed out of histories/ (run, index and export refused it)."""
    ds = tiny_dataset(tmp_path / "ds")
    (tmp_path / "ds" / "x.jsonl").write_text((ds / "histories" / "u0.jsonl").read_text())
    with (ds / "personas.jsonl").open("a") as f:
        f.write(json.dumps({"id": "../x", "name": "X", "background": {}, "traits": [], "role": "r"}) + "\n")
    rc, err = _stats(ds, capsys)
    assert rc == 2 and "user id '../x' cannot name a history file" in err


def test_a_missing_history_is_an_error_not_fewer_turns(tmp_path, capsys):
    """Before: rc 0 with the user's turns silently missing from the counts."""
    ds = tiny_dataset(tmp_path / "ds")
    (ds / "histories" / "u0.jsonl").unlink()
    rc, err = _stats(ds, capsys)
    assert rc == 2 and "histories/u0.jsonl: file not found" in err


def test_broken_history_lines_name_file_and_line(tmp_path, capsys):
    """Before: a truncated line or a bad byte raised without naming the file or line."""
    ds = tiny_dataset(tmp_path / "ds")
    path = ds / "histories" / "u0.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(lines[0] + lines[1][: len(lines[1]) // 2] + b"\n" + lines[2])  # cut mid-line
    rc, err = _stats(ds, capsys)
    assert rc == 2 and "histories/u0.jsonl:2: invalid Turn" in err
    path.write_bytes(lines[0] + lines[1].replace(b"Sure", b"S\xffre") + lines[2])
    rc, err = _stats(ds, capsys)
    assert rc == 2 and "histories/u0.jsonl:2: not valid UTF-8" in err
