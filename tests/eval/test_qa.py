"""QA probe: prompt text, deterministic choice parsing, scoring."""

from __future__ import annotations

import pytest

from iba.eval.qa import parse_choice_why, qa_prompt, score_qa
from iba.types import AnswerKey, QAProbe

OPTIONS = ["Sichuan cuisine", "Cantonese cuisine", "Italian cuisine", "Japanese cuisine"]
PROBE = QAProbe(id="q1", target="s-cuisine", question="Which cuisine does the user prefer now?", options=OPTIONS, answer=2)
KEY = AnswerKey(instance_id="i1", qa=[PROBE])


def test_qa_prompt_letters_the_options():
    text = qa_prompt(PROBE)
    assert text.startswith("Which cuisine does the user prefer now?")
    for line in ("A. Sichuan cuisine", "B. Cantonese cuisine", "C. Italian cuisine", "D. Japanese cuisine"):
        assert line in text
    assert "letter" in text


@pytest.mark.parametrize(
    "text,expected",
    [
        ("C", 2),
        ("c", 2),
        ("(C)", 2),
        ("C.", 2),
        ("C) Italian cuisine", 2),
        ("Answer: C", 2),
        ("**Answer:** c.", 2),
        ("The answer is (B) because of the dim sum.", 1),
        ("I choose option D", 3),
        ("Based on the history, the user now likes Italian cuisine.", 2),
        ("italian CUISINE", 2),
        ("So the best fit is (A).", 0),
        # nothing or several: unscored
        ("", None),
        ("I am not sure.", None),
        ("Either A or B.", None),
        ("Answer: A or answer: B", None),
        ("(A) or (B)", None),
        ("Sichuan cuisine or Cantonese cuisine", None),
        ("Answer: E", None),  # only four options
        ("The answer is a bit unclear", None),  # lower-case 'a' inside a sentence is not a choice
        ("A good question; I cannot tell.", None),
    ],
)
def test_parse_choice(text, expected):
    assert parse_choice_why(text, 4, OPTIONS)[0] == expected


def test_parse_choice_without_options_ignores_text():
    assert parse_choice_why("Italian cuisine", 4)[0] is None
    assert parse_choice_why("B", 2)[0] == 1


def test_score_qa():
    right = score_qa("Answer: C", KEY, "q1", run_key="k")
    assert right.scorer == "qa" and right.score == 1.0 and right.verdicts[0].passed is True
    assert right.verdicts[0].prompt_hash
    wrong = score_qa("A", KEY, "q1")
    assert wrong.score == 0.0 and "correct: C" in wrong.verdicts[0].rationale
    # the agent's failure to pick one option is a failed task: 0, flagged with its reason
    unread = score_qa("no idea", KEY, "q1")
    assert unread.score == 0.0 and unread.verdicts[0].passed is False
    assert unread.failure == "unparseable_answer"
    hedged = score_qa("Either (A) or (C)", KEY, "q1")
    assert hedged.score == 0.0 and hedged.failure == "hedged_answer"
    assert wrong.failure is None and right.failure is None
    missing = score_qa("C", KEY, "q9")
    assert missing.score is None

