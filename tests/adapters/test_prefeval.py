"""The PrefEval importer on invented fixtures in PrefEval's format (see conftest.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from iba.adapters.prefeval import ERROR_TYPES, SYNTHETIC_SUFFIX, import_prefeval
from iba.adapters.prefeval_source import PrefEvalError
from iba.dataset import Dataset
from iba.types import Turn

from .conftest import FILLER, ITEMS, write_prefeval

N_ITEMS = sum(len(v) for v in ITEMS.values())
FILLER_TEXTS = {m for conv in FILLER for m in conv}


def _load(out: Path):
    ds = Dataset(out)
    keys = ds.answer_keys()
    return ds, keys


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _pref_turns(turns: list[Turn]) -> list[Turn]:
    return [t for t in turns if t.text not in FILLER_TEXTS]


@pytest.mark.parametrize("form", ["explicit", "choice", "persona"])
def test_every_form_gives_a_valid_dataset_with_evidence_before_the_task(prefeval_dir, tmp_path, form):
    out = tmp_path / "ds"
    m = import_prefeval(prefeval_dir, out, form=form, filler_turns=5)
    ds, keys = _load(out)
    assert m.counts["instances"] == len(ds.instances) == N_ITEMS
    assert m.counts["qa_probes"] == N_ITEMS and m.counts["mcq_missing"] == 0
    for view in ds.instances:
        assert view.domain == "prefeval" and view.scenario in ITEMS and view.action == "generate"
        turns = ds.history(view.user_id)
        ids = [t.id for t in turns]
        assert len(ids) == len(set(ids))
        stamps = [t.timestamp for t in turns]
        assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps) and stamps[-1] < view.now
        assert sum(t.text in FILLER_TEXTS for t in turns) == 5
        key = keys[view.instance_id]
        assert [c.dimension for c in key.checkpoints] == list(ERROR_TYPES)
        pref = key.checkpoints[0].value
        assert all(pref in c.expected for c in key.checkpoints)  # the preference is in every checkpoint text
        assert pref not in view.query  # the task view must not leak the preference
        for label in key.evidence:
            assert label.turn_id in ids
            assert label.timestamp < view.now
        assert key.checkpoints[0].evidence == [e.turn_id for e in key.evidence]
        assert key.checkpoints[-1].dimension == "unhelpful" and key.checkpoints[-1].evidence == []


def test_explicit_evidence_is_the_statement_and_the_ack_is_marked_synthetic(prefeval_dir, tmp_path):
    import_prefeval(prefeval_dir, tmp_path / "ds", form="explicit", filler_turns=3)
    ds, keys = _load(tmp_path / "ds")
    for view in ds.instances:
        turns = {t.id: t for t in ds.history(view.user_id)}
        key = keys[view.instance_id]
        (label,) = key.evidence
        assert turns[label.turn_id].role == "user" and turns[label.turn_id].text == key.checkpoints[0].value
        synthetic = [t for t in turns.values() if t.id.endswith(SYNTHETIC_SUFFIX)]
        assert len(synthetic) == 1 and synthetic[0].role == "assistant"
        assert synthetic[0].session_id == turns[label.turn_id].session_id
    import_prefeval(prefeval_dir, tmp_path / "noack", form="explicit", filler_turns=3, synthetic_ack=False)
    ds2 = Dataset(tmp_path / "noack")
    assert not any(t.id.endswith(SYNTHETIC_SUFFIX) for v in ds2.instances for t in ds2.history(v.user_id))


def test_choice_evidence_is_the_users_selection(prefeval_dir, tmp_path):
    import_prefeval(prefeval_dir, tmp_path / "ds", form="choice", filler_turns=0)
    ds, keys = _load(tmp_path / "ds")
    for view in ds.instances:
        turns = ds.history(view.user_id)
        assert [t.role for t in turns] == ["user", "assistant", "user", "assistant"]
        (label,) = keys[view.instance_id].evidence
        assert label.turn_id == turns[2].id and turns[2].text.startswith("I'll go with this:")
        assert label.signal_type == "implicit_pattern"


def test_persona_evidence_is_located_or_flagged_empty(prefeval_dir, tmp_path):
    m = import_prefeval(prefeval_dir, tmp_path / "ds", form="persona", filler_turns=4)
    ds, keys = _load(tmp_path / "ds")
    by_id = {v.instance_id: v for v in ds.instances}
    # kitchen_tools #1 never states its preference in the conversation: must not be guessed
    assert m.counts["evidence_unlocated"] == 1 and m.counts["evidence_located"] == N_ITEMS - 1
    unlocated = m.params["evidence_unlocated_instances"]
    assert unlocated == ["pe-persona-kitchen_tools-001-q"]
    assert keys[unlocated[0]].evidence == [] and all(c.evidence == [] for c in keys[unlocated[0]].checkpoints)
    report = json.loads((tmp_path / "ds" / "import_report.json").read_text())
    flagged = [r for r in report["instances"] if r["unlocated"]]
    assert [r["instance_id"] for r in flagged] == unlocated
    for topic in ("kitchen_tools", "garden_plans"):
        iid = f"pe-persona-{topic}-000-q"
        turns = {t.id: t for t in ds.history(by_id[iid].user_id)}
        (label,) = keys[iid].evidence
        # in both fixtures the second user turn is the one that states the preference
        assert turns[label.turn_id].text == ITEMS[topic][0]["persona_turns"][1]


def test_same_seed_same_bytes_other_seed_other_filler(prefeval_dir, tmp_path):
    for name, seed in (("a", 7), ("b", 7), ("c", 8)):
        import_prefeval(prefeval_dir, tmp_path / "out" / name, form="choice", filler_turns=9, position="random", seed=seed)
    a, b, c = (_files(tmp_path / "out" / n) for n in "abc")
    # the manifest names its own folder; everything else must match byte for byte
    a.pop("manifest.json"), b.pop("manifest.json"), c.pop("manifest.json")
    assert a == b
    assert a != c


def test_filler_count_cycles_when_larger_than_the_pool_and_is_a_prefix_across_sizes(prefeval_dir, tmp_path):
    pool = sum(len(c) for c in FILLER)
    import_prefeval(prefeval_dir, tmp_path / "big", form="explicit", filler_turns=pool * 2 + 1)
    import_prefeval(prefeval_dir, tmp_path / "small", form="explicit", filler_turns=4)
    big, small = Dataset(tmp_path / "big"), Dataset(tmp_path / "small")
    uid = big.instances[0].user_id
    big_f = [t.text for t in big.history(uid) if t.text in FILLER_TEXTS]
    small_f = [t.text for t in small.history(uid) if t.text in FILLER_TEXTS]
    assert len(big_f) == pool * 2 + 1
    assert big_f[:4] == small_f


def _pref_session_index(turns: list[Turn]) -> tuple[int, int]:
    sessions = list(dict.fromkeys(t.session_id for t in turns))
    pref_sid = _pref_turns(turns)[0].session_id
    return sessions.index(pref_sid), len(sessions)


def test_position_start_middle_random(prefeval_dir, tmp_path):
    n = sum(len(c) for c in FILLER)  # all three filler conversations: 3 filler sessions
    seen_random = set()
    for pos in ("start", "middle", "random"):
        for seed in range(6):
            out = tmp_path / f"{pos}{seed}"
            import_prefeval(prefeval_dir, out, form="explicit", filler_turns=n, position=pos, seed=seed, topics=["garden_plans"])
            ds = Dataset(out)
            turns = ds.history(ds.instances[0].user_id)
            idx, total = _pref_session_index(turns)
            assert total == 4
            before = sum(t.text in FILLER_TEXTS for t in turns[: turns.index(_pref_turns(turns)[0])])
            if pos == "start":
                assert idx == 0 and before == 0
            elif pos == "middle":
                # the boundary whose filler count before it is closest to half of n
                assert 0 < idx < total - 1 and abs(before - n / 2) <= 3
            else:
                seen_random.add(idx)
    assert len(seen_random) > 1  # random placement actually varies with the seed


def test_mcq_answer_tracks_the_first_option_after_shuffle(prefeval_dir, tmp_path):
    answers = set()
    for seed in range(8):
        import_prefeval(prefeval_dir, tmp_path / f"s{seed}", form="explicit", filler_turns=0, seed=seed)
        keys = Dataset(tmp_path / f"s{seed}").answer_keys()
        for topic, recs in ITEMS.items():
            for i, rec in enumerate(recs):
                (probe,) = keys[f"pe-explicit-{topic}-{i:03d}-q"].qa
                assert sorted(probe.options) == sorted(rec["options"])
                assert probe.options[probe.answer] == rec["options"][0]
                assert probe.question == rec["question"]
                assert probe.target.endswith("-cp-unaware")
                answers.add(probe.answer)
    assert len(answers) > 1  # the options really are shuffled


def test_mcq_matched_by_question_when_reordered_and_missing_file_counted(prefeval_dir, tmp_path):
    path = prefeval_dir / "mcq_options" / "kitchen_tools.json"
    recs = json.loads(path.read_text())
    path.write_text(json.dumps(recs[::-1]))
    import_prefeval(prefeval_dir, tmp_path / "ds", form="explicit", filler_turns=0)
    keys = Dataset(tmp_path / "ds").answer_keys()
    probe = keys["pe-explicit-kitchen_tools-001-q"].qa[0]
    assert probe.options[probe.answer] == ITEMS["kitchen_tools"][1]["options"][0]
    (prefeval_dir / "mcq_options" / "garden_plans.json").unlink()
    m = import_prefeval(prefeval_dir, tmp_path / "ds2", form="explicit", filler_turns=0)
    assert m.counts["mcq_missing"] == 1 and m.counts["qa_probes"] == N_ITEMS - 1


def test_malformed_record_names_file_and_index(prefeval_dir, tmp_path):
    path = prefeval_dir / "implicit_preference" / "choice-based" / "garden_plans.json"
    recs = json.loads(path.read_text())
    recs.append({**recs[0], "conversation": {"query": "q"}})
    path.write_text(json.dumps(recs))
    with pytest.raises(PrefEvalError) as e:
        import_prefeval(prefeval_dir, tmp_path / "ds", form="choice")
    msg = str(e.value)
    assert "garden_plans.json" in msg and "record [1]" in msg and "['conversation']['assistant_options']" in msg
    assert not (tmp_path / "ds").exists()  # nothing written on a bad input


def test_bad_json_and_missing_folder_topic_and_form(prefeval_dir, tmp_path):
    with pytest.raises(PrefEvalError, match="available: garden_plans, kitchen_tools"):
        import_prefeval(prefeval_dir, tmp_path / "ds", topics=["garden_plans", "space_travel"])
    with pytest.raises(PrefEvalError, match="not found"):
        import_prefeval(tmp_path / "nowhere", tmp_path / "ds")
    (prefeval_dir / "explicit_preference" / "garden_plans.json").write_text("[{")
    with pytest.raises(PrefEvalError, match=r"garden_plans.json:1:\d+: not valid JSON"):
        import_prefeval(prefeval_dir, tmp_path / "ds")
    import shutil

    shutil.rmtree(prefeval_dir / "implicit_preference")
    with pytest.raises(PrefEvalError, match="explicit_preference") as e:
        import_prefeval(prefeval_dir, tmp_path / "ds", form="persona")
    assert "persona-driven: missing" in str(e.value)


def test_reimport_replaces_and_foreign_folder_is_refused(prefeval_dir, tmp_path):
    out = tmp_path / "ds"
    import_prefeval(prefeval_dir, out, form="explicit", filler_turns=0)
    import_prefeval(prefeval_dir, out, form="explicit", filler_turns=0, topics=["garden_plans"])
    assert len(list((out / "histories").glob("*.jsonl"))) == 1  # no stale histories from the first import
    other = tmp_path / "notes"
    other.mkdir()
    (other / "todo.txt").write_text("mine")
    with pytest.raises(PrefEvalError, match="not an IBA dataset"):
        import_prefeval(prefeval_dir, other, filler_turns=0)
    assert (other / "todo.txt").read_text() == "mine"


def test_fixture_helper_writes_every_form(tmp_path):
    root = write_prefeval(tmp_path / "p")
    for rel in ("explicit_preference", "implicit_preference/choice-based", "implicit_preference/persona-driven", "mcq_options"):
        assert sorted(p.stem for p in (root / rel).glob("*.json")) == sorted(ITEMS)
