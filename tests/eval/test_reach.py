"""The reach measure on hand-built traces: a gold clause present whole, cut in the middle, absent;
labels with and without a span; superseded evidence; align_slot prompts count for their own slot."""

from __future__ import annotations

from iba.eval.reach import deciding_prompts, gold_clauses, reach_of, reached
from iba.types import AnswerKey, Checkpoint, EvidenceLabel, Slot, TraceStep, Turn

NOW = "2025-03-01T12:00:00"
SAID = "So. Seriously disappointed with the last attempt. Square brackets with a number like [12] keep the sentences short."
CLAUSE = "Square brackets with a number like [12] keep the sentences short."
SPICE = "I hate spicy food, no chili at all please."


def turn(tid: str, text: str) -> Turn:
    return Turn(id=tid, session_id="s", timestamp=NOW, role="user", text=text)


TURNS = {t.id: t for t in [turn("t1", SAID), turn("t2", SPICE), turn("t3", "I love very hot food."), turn("t4", "unlabelled   turn  text")]}


def label(tid: str, dimension: str, *, clause: str | None = None, superseded: bool = False) -> EvidenceLabel:
    span = None
    if clause is not None:
        start = TURNS[tid].text.index(clause)
        span = (start, start + len(clause))
    return EvidenceLabel(turn_id=tid, signal_type="complaint", dimension=dimension, value="v", timestamp=NOW,
                         superseded=superseded, span=span, clause=clause)


def key(with_span: bool) -> AnswerKey:
    return AnswerKey(
        instance_id="i",
        checkpoints=[Checkpoint(id="c1", dimension="citation", dimension_name="Citation", value="numeric", expected="x",
                                kind="static", evidence=["t1"])],
        slots=[Slot(id="s1", param="spice_level", dimension="spice", value="none", accepted=["none"], kind="dynamic",
                    evidence=["t3", "t2"]),
               Slot(id="s2", param="cuisine", dimension="cuisine", value="x", accepted=["x"], evidence=["t4"])],
        evidence=[label("t1", "citation", clause=CLAUSE if with_span else None), label("t2", "spice"),
                  label("t3", "spice", superseded=True)],
    )


def step(name: str, text: str, **inputs) -> TraceStep:
    return TraceStep(step=name, inputs=inputs, prompt_text=text)


def test_gold_clause_is_the_span_when_there_is_one_else_the_whole_turn():
    assert gold_clauses(key(True), TURNS)["c1"] == [CLAUSE]
    assert gold_clauses(key(False), TURNS)["c1"] == [SAID]
    # superseded evidence (the old value) does not decide; a turn without a label counts whole
    assert gold_clauses(key(True), TURNS)["s1"] == [SPICE]
    assert gold_clauses(key(True), TURNS)["s2"] == ["unlabelled turn text"]
    assert gold_clauses(key(True), {})["s2"] == []  # the turn is not in the history: nothing to find


def test_clause_present_whole_cut_in_the_middle_or_absent():
    whole = [step("extract_preferences", f"Evidence:\n- 2025-01-01 | {SAID}")]
    cut = [step("extract_preferences", f"Evidence:\n- 2025-01-01 | {SAID[:70]} \u2026")]
    other = [step("synthesize", "Plan: be brief")]
    for with_span in (True, False):
        k = key(with_span)
        assert reach_of(k, TURNS, deciding_prompts(whole))["c1"] is True
        assert reach_of(k, TURNS, deciding_prompts(cut))["c1"] is False
        assert reach_of(k, TURNS, deciding_prompts(other))["c1"] is False
    # the clause alone is enough when the key has a span: its turn cut before the clause still reaches
    start = [step("synthesize", f"... {CLAUSE.replace(' ', chr(10), 2)}")]  # spacing does not matter
    assert reach_of(key(True), TURNS, deciding_prompts(start))["c1"] is True
    assert reach_of(key(False), TURNS, deciding_prompts(start))["c1"] is False


def test_only_deciding_steps_count_and_align_slot_only_for_its_parameter():
    shown = f"- {SPICE}"
    assert reach_of(key(True), TURNS, deciding_prompts([step("rerank_salience", shown)]))["s1"] is None  # not deciding
    for_cuisine = deciding_prompts([step("align_slot", shown, param="cuisine")])
    assert reach_of(key(True), TURNS, for_cuisine)["s1"] is False
    for_spice = deciding_prompts([step("align_slot", shown, param="spice_level"), step("synthesize", "no evidence")])
    got = reach_of(key(True), TURNS, for_spice)
    assert got["s1"] is True and got["c1"] is False  # a checkpoint never reads align_slot prompts
    assert reached([], for_spice) is None and reached([SPICE], []) is None
    # a step that recorded no prompt (a run stored before prompts were) is not a deciding prompt
    assert deciding_prompts([TraceStep(step="synthesize")]) == []
