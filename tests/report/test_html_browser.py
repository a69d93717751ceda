"""Open the report in a real headless browser (Debian's chromium) and read back the DOM."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from iba.report.build import build_report
from tests.report.fixed_store import build

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def chromium(tmp_path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
         f"--user-data-dir={tmp_path / 'profile'}", *args],
        capture_output=True, text=True, timeout=120,
    )


@pytest.mark.browser
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_report_renders_in_chromium(tmp_path):
    ds, store, _ = build(tmp_path)
    html = build_report(store, [ds], tmp_path / "out")
    res = chromium(tmp_path, "--dump-dom", html.resolve().as_uri())
    dom = res.stdout
    assert res.returncode == 0, res.stderr[-2000:]
    # the parsed DOM (not just our source text) holds Table 4 with its Overall column ...
    assert '<table id="table4"' in dom
    head = dom.split('<table id="table4"', 1)[1].split("</thead>", 1)[0]
    assert "<th>Overall</th>" in head and "<th>Writing</th>" in head
    # iba Overall on the 3 instances every row scored (rag errored on the fourth)
    assert '<td class="num best overall">97.2</td>' in dom
    # ... the figures as inline images, and the per-instance drill-down with its parts
    assert dom.count('src="data:image/png;base64,') == 5
    drill = dom.split('id="run-iba-w1"', 1)[1].split('<details class="inst"', 1)[0]
    for part in ("<h4>Query</h4>", "<h4>Action: generate</h4>", "<h4>Trace</h4>", "<h4>Verdicts</h4>",
                 "Gold evidence in the history", 'class="turn gold"'):
        assert part in drill, part
    assert "<script>" not in dom


@pytest.mark.browser
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_report_screenshot(tmp_path):
    ds, store, _ = build(tmp_path)
    html = build_report(store, [ds], tmp_path / "out")
    shot = tmp_path / "shot.png"
    res = chromium(tmp_path, f"--screenshot={shot}", "--window-size=1280,2200", html.resolve().as_uri())
    assert res.returncode == 0, res.stderr[-2000:]
    assert shot.read_bytes()[:4] == b"\x89PNG" and shot.stat().st_size > 20_000
