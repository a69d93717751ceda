"""The style audit: form (character n-grams, length, punctuation) against evidence, distractors, noise."""

from __future__ import annotations

import json
import shutil

from iba.construct import style_audit
from iba.construct.stats import _distractor_forms, compute_stats, format_table2
from iba.dataset import Dataset


def _labels(root):
    ds = Dataset(root)
    evidence: dict[str, set[str]] = {}
    for tv in ds.instances:
        evidence.setdefault(tv.user_id, set()).update(e.turn_id for e in ds.answer_keys()[tv.instance_id].evidence)
    return evidence, _distractor_forms(ds.root)


def test_the_audit_scores_every_pair_across_personas(demo_dir):
    a = style_audit.audit(demo_dir, *_labels(demo_dir))
    assert a["available"] and a["personas"] == 4 and a["folds"] == 4
    assert a["turns"]["evidence"] > 0 and a["turns"]["distractors"] > a["turns"]["evidence"]
    for name, p in a["pairs"].items():
        assert 0 <= p["auc"] <= 1 and p["ci95"][0] <= p["auc"] <= p["ci95"][1], name
        assert 0 <= p["form_only_auc"] <= 1
    pair = a["pairs"]["evidence_vs_distractors"]
    assert pair["n"] == [a["turns"]["evidence"], a["turns"]["distractors"]]
    assert style_audit.audit(demo_dir, *_labels(demo_dir)) == a  # seeded: the same figures every time


def test_a_style_that_marks_the_evidence_is_found(demo_dir, tmp_path):
    marked = tmp_path / "marked"
    shutil.copytree(demo_dir, marked)
    evidence, distractors = _labels(marked)
    for h in (marked / "histories").glob("*.jsonl"):
        turns = [json.loads(line) for line in h.read_text(encoding="utf-8").splitlines()]
        for t in turns:  # a writer that shouts its evidence
            if t["id"] in evidence.get(h.stem, set()):
                t["text"] = t["text"].upper() + " !!!"
        h.write_text("".join(json.dumps(t) + "\n" for t in turns), encoding="utf-8")
    a = style_audit.audit(marked, evidence, distractors)
    assert a["pairs"]["evidence_vs_distractors"]["auc"] > 0.95
    assert a["pairs"]["evidence_vs_distractors"]["form_only_auc"] > 0.95
    assert "(over)" in style_audit.format_audit(a)[0]


def test_too_small_a_build_is_not_run(demo_dir):
    evidence, distractors = _labels(demo_dir)
    one = dict(list(evidence.items())[:1])
    a = style_audit.audit(demo_dir, one, distractors)
    assert not a["available"] and "at least 2 personas" in a["reason"]
    assert style_audit.format_audit(a) == [f"style audit: not run ({a['reason']})"]


def test_stats_carry_the_style_audit(demo_dir):
    stats = compute_stats(demo_dir)
    assert stats["style_audit"]["available"]
    assert "style audit (character n-grams" in format_table2(stats)
    assert "style_audit" not in compute_stats(demo_dir, audit=False)
    assert "style_audit" not in compute_stats(demo_dir, style=False) and "tell_audit" in compute_stats(demo_dir, style=False)


def test_a_build_leaves_the_style_audit_to_iba_stats(tmp_path):
    """A build's stats.json has the tell audit, not the style audit (its cost is iba stats's)."""
    from iba.construct.builder import build_dataset

    build_dataset(tmp_path / "ds", preset="demo", seed=7, progress=False)
    built = json.loads((tmp_path / "ds" / "stats.json").read_text())
    assert "tell_audit" in built and "style_audit" not in built
