"""The LLM writer's shared pieces: spans recovered where the clause is in the turn, the verdict shapes."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from iba.construct.llm_exchange import locate, recover_spans, verdict_model

TURN = "Honestly, I keep ordering the mild one. The spicy stuff just wrecks my evening, you know?"


def test_a_quote_found_in_the_turn_is_the_span_whatever_its_case_and_quote_marks():
    s, e, text = locate(TURN, '"the spicy stuff just wrecks my evening."')
    assert TURN[s:e] == text == "The spicy stuff just wrecks my evening"


@pytest.mark.parametrize("phrase", ["spicy", "the spicy stuff wrecks my evening", ""])
def test_short_or_absent_quotes_locate_nothing(phrase):
    assert locate(TURN, phrase) is None


def test_spans_come_from_the_quote_else_the_cue_else_are_absent():
    wanted = [("spice", "I keep ordering the mild one"), ("texture", "soft food only"), ("cuisine", "noodles every day")]
    quotes = ["The spicy stuff just wrecks my evening", "not in the turn at all", ""]
    spans = recover_spans(TURN, wanted, quotes)
    assert spans["spice"][2] == "The spicy stuff just wrecks my evening"  # the quote before the cue
    assert "texture" not in spans and "cuisine" not in spans
    assert recover_spans(TURN, wanted[:1], [])["spice"][2] == "I keep ordering the mild one"  # the cue, verbatim


def test_verdicts_carry_one_quote_per_target():
    model = verdict_model(2, True)
    ok = model.model_validate({"reveals": True, "states_outright": False, "reveals_other": False, "quotes": ["a", "b"]})
    assert ok.quotes == ["a", "b"] and ok.reason == ""
    with pytest.raises(ValidationError):
        model.model_validate({"reveals": True, "states_outright": False, "reveals_other": False, "quotes": ["a"]})
    with pytest.raises(ValidationError):  # a distractor's verdict must say whether it reveals a key value
        model.model_validate({"reveals": True, "states_outright": False, "quotes": ["a", "b"]})
    assert "reveals_other" not in verdict_model(1, False).model_fields
