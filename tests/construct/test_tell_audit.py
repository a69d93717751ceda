"""The tell audit: it finds a planted tell, and the builder's histories pass it."""

from __future__ import annotations

import json

import pytest

from iba.construct.tell_audit import TARGETS, audit, format_audit, recurrence

pytest.importorskip("sklearn")


def _history(path, turns):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"id": i, "role": r, "text": t}) + "\n" for i, r, t in turns), encoding="utf-8")


def test_audit_finds_a_planted_tell(tmp_path):
    """Evidence turns that all say "zebra": the classifier ranks them first; the audit can fail."""
    evidence = {}
    for u in range(9):
        turns, ev = [], set()
        for k in range(60):
            tid = f"u{u}-t{k}"
            if k % 10 == 3:
                turns.append((tid, "user", f"zebra stripes number {k} are what I mean"))
                ev.add(tid)
            else:
                turns.append((tid, "user", f"the weather on day {k} was grey and the bus ran late"))
            turns.append((f"{tid}a", "assistant", "I see."))
        _history(tmp_path / "histories" / f"u{u}.jsonl", turns)
        evidence[f"u{u}"] = ev
    a = audit(tmp_path, evidence)
    c = a["classifier"]
    assert c["available"] and c["test_personas"] == 3 and c["train_personas"] == 6
    assert c["precision_at_n"] == 1.0 and c["auc_evidence_vs_rest"] == 1.0
    assert c["auc_evidence_vs_distractors"] is None  # no distractors in this dataset
    assert "zebra" in c["top_evidence_features"]
    assert any("precision at N" in line for line in format_audit(a))


def test_recurrence_counts_repeated_long_sentences():
    same = "The weather in Denver has been so grey this week."
    turns = [("t%d" % i, "user", same) for i in range(12)] + [("x", "user", "A different and long enough sentence.")]
    share, most = recurrence(turns)
    assert most == 12 and share == pytest.approx(12 / 13)
    assert recurrence([("a", "user", "Short."), ("b", "assistant", "Okay.")]) == (0.0, 0)


def test_audit_says_what_to_install_without_scikit_learn(tmp_path, monkeypatch):
    import builtins

    real = builtins.__import__

    def no_sklearn(name, *args, **kwargs):
        if name.startswith("sklearn"):
            raise ImportError(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_sklearn)
    for u in range(3):
        _history(tmp_path / "histories" / f"u{u}.jsonl", [(f"u{u}-1", "user", "hello there"), (f"u{u}-2", "user", "a preference")])
    a = audit(tmp_path, {f"u{u}": {f"u{u}-2"} for u in range(3)})
    assert a["classifier"] == {"available": False, "reason": "scikit-learn is not installed: pip install 'iba[audit]'"}


@pytest.fixture(scope="module")
def full_like(tmp_path_factory):
    """The full preset's shape at a fraction of its size: ~16 tasks per persona, noise ratio 100."""
    from iba.construct.builder import build_dataset
    from iba.construct.presets import Preset

    out = tmp_path_factory.mktemp("fulllike")
    build_dataset(out, preset=Preset(name="full-like", help="", personas=24, instances_per_scenario=6), seed=11, progress=False)
    return out


def test_the_builders_histories_are_within_the_audit_targets(full_like):
    """Targets of issue 24 on a build of the full preset's shape (seed 11 was never used to tune the
    generator): wording alone does not find the evidence, sentences do not recur, a fifth of the
    checkpoints change over time."""
    stats = json.loads((full_like / "stats.json").read_text(encoding="utf-8"))
    a = stats["tell_audit"]
    c = a["classifier"]
    assert c["available"] and c["test_evidence_turns"] > 100
    assert c["precision_at_n"] <= TARGETS["precision_at_n"], c
    assert c["auc_evidence_vs_distractors"] <= TARGETS["auc_evidence_vs_distractors"], c
    assert a["recurrence"]["median_share"] <= TARGETS["recurrence_median_share"] and a["recurrence"]["max_repeats"] <= 3
    assert stats["dynamic_checkpoint_share"] >= 0.20
    assert stats["distractors_per_relevant"] >= 5


def test_the_audit_in_a_worker_gives_the_same_figures(full_like):
    """The build runs the classifier in a worker beside the rest: the same figures as in one process."""
    from iba.construct.stats import compute_stats

    stats = json.loads((full_like / "stats.json").read_text(encoding="utf-8"))
    one = compute_stats(full_like, workers=1, style=False)  # as the build computes them
    assert json.loads(json.dumps(one)) == stats
    assert compute_stats(full_like, workers=2, style=False) == one


def test_ngrams_are_scikit_learns(full_like):
    """The audit's own analyzer gives the n-grams scikit-learn's default analyzer gives."""
    from sklearn.feature_extraction.text import HashingVectorizer

    from iba.construct.tell_audit import _ngrams

    analyze = HashingVectorizer(ngram_range=(1, 2), lowercase=True).build_analyzer()
    texts = [json.loads(line)["text"] for line in (full_like / "histories" / "u0000.jsonl").read_text(encoding="utf-8").splitlines()]
    texts += ["", "a", "I'm OK", "Ünïcödé Straße naïve café", "ΣΊΣΥΦΟΣ İstanbul", "snake_case x2 2x 42 don't-stop", "tab\there\nnewline"]
    for t in texts:
        assert _ngrams(t) == analyze(t), t
