"""One positive and one negative text per verifier id, and the registry covers the taxonomy's ids."""

from __future__ import annotations

import pytest

from iba.eval.verifiers import VERIFIERS, run_verifier, score_verifiers
from iba.types import Checkpoint, VerifierRef

NUMBERED = "Plan:\n1. Wake up early\n2. Run 5 km\n3. Stretch\n"
BULLETS = "Plan:\n- Wake up early\n- Run 5 km\n- Stretch\n"
PROSE = "I wake up early. Then I run five kilometres and stretch afterwards."
CODE = "Install it:\n\n```python\nimport iba\n```\n"
TABLE = "| name | type |\n|------|------|\n| id | int |\n"
HEADINGS = "# Overview\n\nText.\n\n## Usage\n\nMore."
CITED = "Sleep matters for memory (Walker, 2017) and mood [2]."

CASES = [
    ("word_count_range", {"min": 3, "max": 5}, "one two three four", "one two"),
    ("word_count_max", {"max": 5}, "one two three", "one two three four five six"),
    ("word_count_min", {"min": 5}, "one two three four five six", "one two"),
    ("numbered_list", {}, NUMBERED, BULLETS),
    ("unnumbered_bullets", {}, BULLETS, NUMBERED),
    ("no_bullets", {}, PROSE, BULLETS),
    ("item_count", {"n": 3}, NUMBERED, "1. a\n2. b\n3. c\n4. d\n"),
    ("first_person", {}, PROSE, "The user wakes up early and runs."),
    ("third_person", {}, "She wakes up early; her run is short.", PROSE),
    ("has_code_block", {}, CODE, PROSE),
    ("no_code_block", {}, PROSE, CODE),
    ("has_table", {}, TABLE, PROSE),
    ("no_table", {}, PROSE, TABLE),
    ("has_headings", {}, HEADINGS, PROSE),
    ("no_headings", {}, PROSE, HEADINGS),
    ("contains_any", {"terms": ["tofu", "congee"]}, "A bowl of Congee.", "A bowl of rice."),
    ("contains_none", {"terms": ["peanut"]}, "No nuts here.", "Peanut sauce on top."),
    ("has_citations", {}, CITED, "Sleep matters for memory and mood."),
]


def test_registry_covers_every_taxonomy_verifier_id():
    from iba.taxonomy import VERIFIER_IDS

    assert set(VERIFIER_IDS) == set(VERIFIERS)
    assert {c[0] for c in CASES} == set(VERIFIERS)


@pytest.mark.parametrize("vid,params,good,bad", CASES, ids=[c[0] for c in CASES])
def test_positive_and_negative(vid, params, good, bad):
    ok, why = VERIFIERS[vid](good, **params)
    assert ok is True, why
    ok, why = VERIFIERS[vid](bad, **params)
    assert ok is False, why
    assert why


def test_details():
    # words inside code blocks do not count; CJK characters count one each
    assert VERIFIERS["word_count_max"]("two words\n```\n" + "x " * 50 + "\n```", max=2)[0]
    assert VERIFIERS["word_count_min"]("\u4f60\u597d\u4e16\u754c", min=4)[0]
    # a list nested under another item does not change the top-level count
    nested = "1. a\n   - detail\n   - detail\n2. b\n3. c\n"
    assert VERIFIERS["item_count"](nested, n=3)[0]
    # two lists: one of them having n items is enough
    two = "## Strengths\n- s1\n- s2\n\n## Weaknesses\n- w1\n- w2\n- w3\n"
    assert VERIFIERS["item_count"](two, n=3)[0] and not VERIFIERS["item_count"](two, n=5)[0]
    # a horizontal rule is not a bullet; quoted speech is not the narrator's voice
    assert VERIFIERS["no_bullets"]("Intro\n\n---\n\nEnd")[0]
    assert VERIFIERS["third_person"]('He said "I will go" and left.')[0]
    # whole-word matching: "tofu" does not match "tofurky"
    assert not VERIFIERS["contains_any"]("tofurky roast", terms=["tofu"])[0]
    # a code fence with a table inside is code, not a table
    assert not VERIFIERS["has_table"]("```\n| a | b |\n|---|---|\n```")[0]


def test_run_verifier_and_score_record():
    cps = [
        Checkpoint(id="c1", dimension="d", dimension_name="D", value="v", expected="has a table", kind="static",
                   evidence=[], verifier=VerifierRef(id="has_table")),
        Checkpoint(id="c2", dimension="d2", dimension_name="D2", value="v", expected="short", kind="static",
                   evidence=[], verifier=VerifierRef(id="word_count_max", params={"max": 3})),
        Checkpoint(id="c3", dimension="d3", dimension_name="D3", value="v", expected="tone", kind="static", evidence=[]),
        Checkpoint(id="c4", dimension="d4", dimension_name="D4", value="v", expected="x", kind="static", evidence=[],
                   verifier=VerifierRef(id="word_count_max", params={"maximum": 3})),  # bad params
    ]
    rec = score_verifiers(TABLE, cps, run_key="k")
    assert rec is not None and rec.scorer == "verifiers"
    assert [(v.target, v.judge, v.passed) for v in rec.verdicts] == [
        ("c1", "verifier:has_table", True), ("c2", "verifier:word_count_max", False),
        ("c4", "verifier:word_count_max", None),
    ]
    assert rec.score == pytest.approx(0.5)  # the unscored one is left out, not counted as 0
    assert run_verifier(VerifierRef(id="nope"), "x", "c").passed is None
    assert score_verifiers(TABLE, [cps[2]]) is None
