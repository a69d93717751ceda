"""Evidence spans: each label says which clause of its turn reveals the value, and the check holds it to that."""

from __future__ import annotations

import json
import shutil

import pytest

from iba.construct.evidence import clause, fill
from iba.dataset import Dataset, DatasetError


def test_fill_puts_cues_in_verbatim_and_knows_where():
    template = "Well, \x000\x00. And \x011\x01! Thanks."
    text, spans = fill(template, [("a", "we walk through item 4, item 5... so they need numbers."), ("b", "congee is fine!")])
    # the cue's own "..." survives (tidying never sees cues); its final full stop is the wrapper's
    assert text == "Well, we walk through item 4, item 5... so they need numbers. And Congee is fine! Thanks."
    for name, (start, end, c) in spans.items():
        assert text[start:end] == c
    assert spans["b"][2] == "Congee is fine!"  # the capitalised token; "!!" collapsed to one


def test_clause_folds_spaces_and_drops_the_final_stop():
    assert clause("  two  spaces.  ") == "two spaces"


@pytest.mark.parametrize("which", ["demo", "small"])
def test_every_procedural_label_has_a_span_of_its_clause(which, request):
    ds = request.getfixturevalue(which)
    ds.check()  # the check compares each span with its turn's text
    n = 0
    for key in ds.answer_keys().values():
        for lab in key.evidence:
            assert lab.span is not None and lab.clause, lab
            n += 1
    assert n > 10
    assert all(lab.span is not None for items in ds.distractors().values() for lab in items)


def test_the_check_catches_a_span_that_does_not_fit(demo_dir, tmp_path):
    root = tmp_path / "d"
    shutil.copytree(demo_dir, root)
    path = root / "answer_key.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    key = json.loads(lines[0])
    lab = key["evidence"][0]
    lab["span"] = [lab["span"][0] + 1, lab["span"][1] + 1]  # off by one: the right length, the wrong text
    lines[0] = json.dumps(key)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(DatasetError, match=r"answer_key.jsonl:1: evidence span .* not the labelled clause"):
        Dataset(root).check()


def test_a_span_and_its_clause_must_agree_in_length():
    from pydantic import ValidationError

    from iba.types import EvidenceLabel

    base = dict(turn_id="t", signal_type="complaint", dimension="d", value="v", timestamp="2025-01-01T00:00:00")
    EvidenceLabel(**base, span=(3, 6), clause="abc")
    with pytest.raises(ValidationError, match="does not fit"):
        EvidenceLabel(**base, span=(3, 7), clause="abc")
    with pytest.raises(ValidationError, match="go together"):
        EvidenceLabel(**base, span=(3, 6))
