"""End to end on the shared PrefEval subset; skipped where that folder is absent.

Only counts and ids are asserted: PrefEval's text must not be copied into the repository.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from iba.adapters.prefeval import import_prefeval
from iba.dataset import Dataset

DATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "prefeval"
TOPICS = ["travel_restaurant", "shop_motors"]

pytestmark = pytest.mark.skipif(not DATA.is_dir(), reason=f"{DATA} absent (PrefEval subset not shared here)")


def _n_items(topic: str) -> int:
    return len(json.loads((DATA / "explicit_preference" / f"{topic}.json").read_text(encoding="utf-8")))


def test_real_prefeval_persona_two_topics(tmp_path):
    m = import_prefeval(DATA, tmp_path / "ds", topics=TOPICS, form="persona", filler_turns=10, position="middle")
    n = sum(_n_items(t) for t in TOPICS)
    assert m.counts["instances"] == n and m.counts["qa_probes"] == n and m.counts["checkpoints"] == 4 * n
    report = json.loads((tmp_path / "ds" / "import_report.json").read_text())
    flagged = [r["instance_id"] for r in report["instances"] if r["unlocated"]]
    assert m.counts["evidence_unlocated"] == len(flagged) == len(m.params["evidence_unlocated_instances"])
    # the locator must find most stated preferences; a broken one would flag nearly all
    assert len(flagged) < 0.15 * n
    ds = Dataset(tmp_path / "ds")
    keys = ds.answer_keys()
    for view in ds.instances:
        turns = ds.history(view.user_id)
        ids = {t.id: t for t in turns}
        assert len(turns) >= 10 + 2  # the filler plus at least one exchange
        for label in keys[view.instance_id].evidence:
            assert ids[label.turn_id].role == "user" and label.timestamp < view.now
        assert (view.instance_id in flagged) == (not keys[view.instance_id].evidence)


def test_real_prefeval_explicit_always_located(tmp_path):
    m = import_prefeval(DATA, tmp_path / "ds", topics=TOPICS[:1], form="explicit", filler_turns=300)
    assert m.counts["evidence_unlocated"] == 0
    assert m.counts["turns"] == m.counts["instances"] * (300 + 2)
