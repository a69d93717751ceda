"""`iba report` from the command line."""

from __future__ import annotations

from iba.cli import main
from tests.report.fixed_store import build


def test_report_command(tmp_path, capsys):
    ds, store, _ = build(tmp_path)
    out = tmp_path / "rep"
    assert main(["report", str(store), "--dataset", str(ds), "--out", str(out), "--run", "main"]) == 0
    printed = capsys.readouterr().out
    assert "| rag (m) | 64.6 | 66.7 | 65.3 |" in printed and f"report: {out / 'report.html'}" in printed
    for name in ("table4.md", "table4.csv", "cells.csv", "report.md", "report.html", "cost.csv", "scenarios.csv"):
        assert (out / name).exists(), name


def test_report_command_unknown_run_and_missing_store(tmp_path, capsys):
    assert main(["report", str(tmp_path / "x.sqlite"), "--out", str(tmp_path / "o")]) == 2
    ds, store, _ = build(tmp_path)
    assert main(["report", str(store), "--out", str(tmp_path / "o"), "--run", "other"]) == 2
    err = capsys.readouterr().err
    assert "no run named other" in err and "runs: main" in err


def test_empty_store_gives_an_empty_report(tmp_path):
    from iba.report.build import build_report
    from iba.run.store import Store

    Store(tmp_path / "e.sqlite").close()
    html = build_report(tmp_path / "e.sqlite", [], tmp_path / "o")
    assert html.exists() and "No task runs" in (tmp_path / "o" / "table4.md").read_text()
