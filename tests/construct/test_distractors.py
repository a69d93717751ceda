"""Distractor preferences: many, shaped like evidence, and never contradicting the answer key."""

from __future__ import annotations

from collections import defaultdict

import pytest

from iba.construct import distractors as dmod
from iba.construct.evidence_bank import PEOPLE
from iba.taxonomy import load_taxonomy

def test_every_dimension_has_a_facet_and_facets_name_real_dimensions():
    tax = load_taxonomy()
    keys = {f"{s.id}.{d.id}" for s in tax.scenarios() for d in s.dimensions}
    f = dmod.facets()
    listed = {m for group in (f.generic, f.anchored) for members in group.values() for m in members}
    assert listed <= keys, sorted(listed - keys)
    assert keys <= listed, sorted(keys - listed)


@pytest.mark.parametrize(
    "a,b,generic,anchored",
    [
        (("food_ordering", "spice"), ("diet_plan", "diet_pattern"), True, False),  # food: whatever the turn says
        (("exercise_plan", "time_of_day"), ("study_plan", "time_of_day"), True, True),
        (("research_report_writing", "structure"), ("resume", "section_order"), False, True),  # documents: say which
        (("food_ordering", "cuisine"), ("programming", "language"), False, False),
        (("food_ordering", "cuisine"), ("food_ordering", "spice"), True, False),  # same scenario
    ],
)
def test_relations(a, b, generic, anchored):
    assert dmod.generic_related(a, b) is generic
    assert dmod.anchored_related(a, b) is anchored


def test_own_pool_is_the_pairwise_rule():
    """own_pool (facet memberships) keeps what the pairwise relations allow, with the same flags."""
    import random

    tax = load_taxonomy()
    scenarios = tax.scenarios()
    rng = random.Random(5)
    for _ in range(40):
        tasks = rng.sample(scenarios, rng.randrange(1, 20))
        taken = [(s.id, d.id) for s in tasks for d in s.dimensions]
        ids = {s.id for s in tasks}
        want = [(s, d, any(dmod.anchored_related((s.id, d.id), t) for t in taken))
                for s in scenarios if s.id not in ids for d in s.dimensions
                if not any(dmod.generic_related((s.id, d.id), t) for t in taken)]
        assert dmod.own_pool(tax, tasks) == want


def _tasks(ds):
    tax = load_taxonomy()
    out = defaultdict(list)
    for tv in ds.instances:
        out[tv.user_id].append(tax.scenario(tv.scenario))
    return out


@pytest.mark.parametrize("which", ["demo", "small"])
def test_distractors_never_touch_a_task_dimension(which, request):
    """The key stays true: no distractor voices a preference on a dimension of a scenario its user has
    a task in, or on one a reader could take for one (a generic facet); one that shares an anchored
    facet names its own scenario in the turn; none is itself an evidence turn."""
    ds = request.getfixturevalue(which)
    tasks = _tasks(ds)
    keys = ds.answer_keys()
    evidence = {e.turn_id for k in keys.values() for e in k.evidence}
    labels = ds.distractors()
    assert labels, "the build has distractors"
    tax = load_taxonomy()
    checked = 0
    for user, items in labels.items():
        taken = [(s.id, d.id) for s in tasks[user] for d in s.dimensions]
        task_cues = {c for s in tasks[user] for d in s.dimensions for v in d.values for c in v.all_cues}
        text = {t.id: t.text for t in ds.history(user)}
        for lab in items:
            k = (lab.scenario, lab.dimension)
            assert lab.turn_id not in evidence
            assert lab.scenario not in {s.id for s in tasks[user]}, lab
            assert not any(dmod.generic_related(k, t) for t in taken), lab
            assert lab.clause is not None and lab.clause not in task_cues
            if lab.form in ("own_other_topic", "ended") and any(dmod.anchored_related(k, t) for t in taken):
                assert tax.scenario(lab.scenario).name.lower() in text[lab.turn_id].lower(), (lab, text[lab.turn_id])
            if lab.form == "hypothetical":
                assert tax.scenario(lab.scenario).name.lower() in text[lab.turn_id].lower()
            checked += 1
    assert checked == sum(len(v) for v in labels.values())


def test_a_persona_holds_one_value_per_own_distractor_dimension(small):
    held: dict[tuple[str, str, str], set[str]] = defaultdict(set)
    ended: list = []
    for user, items in small.distractors().items():
        for lab in items:
            if lab.form in ("own_other_topic", "hypothetical"):
                held[(user, lab.scenario, lab.dimension)].add(lab.value)
            elif lab.form == "ended":
                ended.append(lab)
    assert held and all(len(v) == 1 for v in held.values())
    for lab in ended:  # an ended preference is another value than the one held now
        now = held.get((lab.user_id, lab.scenario, lab.dimension))
        assert not now or lab.value not in now


@pytest.mark.parametrize("which", ["demo", "small"])
def test_preference_talk_is_common(which, request):
    """At least five distractor turns per labelled turn (the issue's floor), of every form."""
    ds = request.getfixturevalue(which)
    stats = ds.manifest.counts
    n = stats["distractor_turns"]
    assert n >= 5 * stats["relevant_turns"], stats
    forms = {lab.form for items in ds.distractors().values() for lab in items}
    assert forms == {"own_other_topic", "other_person", "ended", "hypothetical"}


def test_other_peoples_exchanges_say_whose_it_is(small):
    """Someone else's preference: the turn reads like any other, the exchange says who it was for."""
    seen = 0
    for user, items in small.distractors().items():
        hist = small.history(user)
        at = {t.id: i for i, t in enumerate(hist)}
        for lab in items:
            if lab.form != "other_person":
                continue
            i = at[lab.turn_id]
            session = [t.text.lower() for t in hist if t.session_id == hist[i].session_id]
            k = next(j for j, t in enumerate(hist) if t.session_id == hist[i].session_id)
            around = " ".join(session[max(0, i - k - 2): i - k + 3])
            assert any(who in around for who in PEOPLE), around
            seen += 1
    assert seen > 20


def test_no_room_leaves_distractors_out_instead_of_failing(tmp_path):
    from iba.construct.builder import build_dataset
    from iba.dataset import Dataset

    build_dataset(tmp_path, preset="demo", seed=3, history_turns=40, progress=False)
    ds = Dataset(tmp_path)
    ds.check()
    assert ds.manifest.counts["distractor_turns"] < 5 * ds.manifest.counts["relevant_turns"]


def test_no_distractors_knob(tmp_path):
    from iba.construct.builder import build_dataset
    from iba.dataset import Dataset

    build_dataset(tmp_path, preset="demo", seed=3, progress=False, distractors_on=False)
    ds = Dataset(tmp_path)
    assert ds.distractors() == {} and ds.manifest.counts["distractor_turns"] == 0
    assert not (tmp_path / "distractors.jsonl").exists()


def test_an_ended_preference_is_reported_speech_in_the_words_new_ones_use(small):
    """Generator 3: an ended preference is what the user used to say (a cue in the present tense
    reads right after "I'd have said", not after "a few years back"), and the words that say it
    ended also tell of a new preference in evidence frames, so that they do not mark a distractor."""
    from iba.construct.evidence_bank import ENDED_FRAMES_V3, RECENT_FRAMES_V3

    seen = 0
    for user, items in small.distractors().items():
        text = {t.id: t.text for t in small.history(user)}
        for lab in items:
            if lab.form == "ended":
                before = text[lab.turn_id][: lab.span[0]]
                # (the scenario, where named, comes between: "I'd have said with X, ...")
                assert any(v in before for v in ("have said ", "told you ", "sure that ")), text[lab.turn_id]
                seen += 1
    assert seen > 5
    for marker in ("once", "a few years back", "moved on", "student days", "there was a time", "come round"):
        assert any(marker in f for f in ENDED_FRAMES_V3) and any(marker in f for f in RECENT_FRAMES_V3), marker
