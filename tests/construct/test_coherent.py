"""Generator v3's coherent exchanges: answers to the question asked, no seams, few asides, one topic
through a session, the same bytes for any number of workers."""

from __future__ import annotations

import json
import random

import pytest

from iba.construct import coherent
from iba.construct.builder import build_dataset, plan_dataset
from iba.construct.coherence import measure, seams
from iba.construct.noise import Voice
from iba.construct.noise_topics import load_noise_topics
from iba.construct.presets import get_preset
from iba.construct.procedural_writer import ProceduralWriter
from iba.construct.sentences import sentences
from iba.taxonomy import load_taxonomy


@pytest.mark.parametrize(
    ("lead", "text", "want"),
    [
        ("Well,", "Cooked food keeps for three days.", "Well, cooked food keeps for three days."),
        ("Well,", "I think so.", "Well, I think so."),
        ("From what I know,", "Sweden's advice is to keep cash.", "From what I know, Sweden's advice is to keep cash."),
        ("Right, so", "UK cheques clear in two days.", "Right, so UK cheques clear in two days."),
        ("Sure.", "cooked food keeps.", "Sure. Cooked food keeps."),
        ("Short answer:", "yes.", "Short answer: Yes."),
        ("", "cooked food keeps.", "Cooked food keeps."),
        ("Okay.", ". Odd start", "Okay. Odd start"),  # one mark where the fragments meet
        ("Hmm,", "Wait... really?", "Hmm, wait... really?"),  # an ellipsis inside a fragment stays
        ("Hi,", ", there", "Hi, there"),
    ],
)
def test_join_lowercases_after_a_connector_unless_a_name_or_I(lead, text, want):
    assert coherent.join(lead, text) == want


def test_a_word_the_bank_writes_in_lower_case_is_not_a_proper_noun():
    assert not coherent.starts_proper("Cooked food")
    assert coherent.starts_proper("I'd say")
    assert coherent.starts_proper("FYI, this")
    assert coherent.starts_proper("Sweden's rules")


def test_seams_are_found():
    assert seams("Well, Cooked food keeps.")["capital_after_connector"] == 1
    assert seams("Well, I know. From here, Sweden looks far.")["capital_after_connector"] == 0
    assert seams("Great!. Thanks,. ok")["doubled_punctuation"] == 2
    assert seams("Wait... really? Items 1., 2. and 3.")["doubled_punctuation"] == 0
    assert seams("Look, fYI, it broke")["broken_capitals"] == 1
    assert seams("fine. then")["lower_case_start"] == 2


def test_every_paired_question_has_an_answer_fact_in_its_topic():
    topics = load_noise_topics()
    assert all(t.answers is not None and t.opener_answers is not None for t in topics)
    for t in topics:
        paired = [a for a in (*t.answers, *t.opener_answers) if a >= 0]
        assert len(paired) == len(set(paired)), f"{t.id}: a fact answers two questions"
    share = sum(a >= 0 for t in topics for a in t.answers) / sum(len(t.answers) for t in topics)
    assert share > 0.7  # most questions have an answer in the data (the rest get a hedge)


def test_a_user_turn_has_at_most_one_aside_and_few_have_one():
    voice = Voice(city="Lyon", version=3)
    rng = random.Random(5)
    texts = [coherent.with_aside(rng, voice, "How does it work?") for _ in range(2000)]
    with_one = [t for t in texts if t != "How does it work?"]
    assert all(len(sentences(t)) == 2 for t in with_one)
    assert abs(len(with_one) / len(texts) - coherent.ASIDE_RATE) < 0.03
    assert coherent.ASIDE_RATE <= 0.2  # a small share of turns


@pytest.fixture(scope="module")
def v3_small(tmp_path_factory):
    out = tmp_path_factory.mktemp("v3small")
    build_dataset(out, preset="small", seed=3, personas=6, progress=False)
    return out


def test_an_assistant_turn_answers_the_question_before_it(demo_dir, v3_small):
    for root in (demo_dir, v3_small):
        m = measure(root)
        assert m["questions_asked"] > 20
        assert m["answered"] == 1.0 and m["other_answer"] == 0.0


def test_a_question_without_an_answer_in_the_data_gets_a_hedge(v3_small):
    qs = {q: a for t in load_noise_topics() for q, a in zip(t.questions, t.answers or [])}
    seen = 0
    for path in sorted((v3_small / "histories").glob("*.jsonl")):
        turns = [json.loads(line) for line in path.read_text().splitlines()]
        for user, reply in zip(turns, turns[1:]):
            if user["role"] != "user":
                continue
            asked = [qs[s] for s in qs if s in user["text"]]
            if asked and asked[0] < 0:
                seen += 1
                assert reply["text"].startswith(coherent.HEDGES), reply["text"]
    assert seen > 0


def test_no_seams_and_asides_at_a_natural_rate(demo_dir, v3_small):
    for root in (demo_dir, v3_small):
        m = measure(root)
        assert m["seams_per_1000_turns"] == 0, m["seams_by_kind_per_1000_turns"]
        assert m["user_turns_with_2plus_asides"] == 0
        assert m["asides_per_user_turn"] <= 0.2


def _topic_of_sentence() -> dict[str, str]:
    out = {}
    for t in load_noise_topics():
        for s in (*t.questions, *t.details):
            out[s] = t.id
    return out


def test_a_session_goes_back_to_its_topic_after_an_exchange():
    """Noise on both sides of an evidence or distractor exchange is about the same topic (unless the
    topic was spent in this history before the exchange, which the writer then says with a change
    of topic)."""
    taxonomy = load_taxonomy()
    plans = plan_dataset(taxonomy, get_preset("demo"), seed=42, noise_ratio=50, history_turns=None, personas=None)
    topic_of = _topic_of_sentence()
    resumed = checked = 0
    for plan in plans:
        writer = ProceduralWriter(42, version=3)
        for session in plan.sessions:
            texts = writer.texts(plan, session)
            marks = sorted([off for off, _ in session.distractors] + ([session.offset] if session.kind != "noise" else []))
            for off in marks:
                before = [topic_of[s] for t in texts[:off:2] for s in topic_of if s in t]
                after_turn = texts[off + 4] if off + 4 < len(texts) else None
                if not before or after_turn is None:
                    continue
                after = [topic_of[s] for s in topic_of if s in after_turn]
                if not after:
                    continue
                checked += 1
                if after[0] == before[-1]:
                    resumed += 1
                    assert after_turn.startswith(tuple(r.strip() for r in coherent.RESUMES)) or not any(
                        after_turn.startswith(c.strip()) for c in ("Different question", "Unrelated", "Switching topics")), after_turn
    assert checked > 5 and resumed / checked > 0.8, (resumed, checked)
