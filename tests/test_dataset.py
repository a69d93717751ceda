import json

import pytest

from iba import dataset as dataset_mod
from iba.dataset import MAX_TURN_CHARS, Dataset, DatasetError
from iba.taxonomy import load_taxonomy
from tests.run.helpers import tiny_dataset


def test_roundtrip(tmp_path):
    ds = Dataset(tiny_dataset(tmp_path / "ds"))
    assert [t.instance_id for t in ds.instances] == ["i0", "i1"]
    assert ds.history("u0")[0].id == "u0-s0-t0"
    assert set(ds.answer_keys()) == {"i0", "i1"}


def test_bad_line_reports_file_and_line(tmp_path):
    root = tiny_dataset(tmp_path / "ds")
    path = root / "instances.jsonl"
    lines = path.read_text().splitlines()
    lines[1] = lines[1].replace('"call_api"', '"phone_call"')
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DatasetError, match=r"instances.jsonl:2: invalid TaskView: action"):
        Dataset(root).instances


def test_history_is_parsed_once_until_its_file_changes(tmp_path, monkeypatch):
    ds = Dataset(tiny_dataset(tmp_path / "ds"))
    reads = []
    real = ds._read_history
    monkeypatch.setattr(ds, "_read_history", lambda path: reads.append(path) or real(path))
    first = ds.history("u0")
    first.reverse()  # a caller's reordering must not reach the next caller
    again = ds.history("u0")
    assert len(reads) == 1 and again[0].id == "u0-s0-t0"
    path = ds.history_path("u0")
    lines = _lines(path)
    _write(path, lines[:2])  # a different size: read again, and the edit is seen
    assert len(ds.history("u0")) == 2 and len(reads) == 2
    # a bad edit is still an error after a good read
    _edit_json(path, 2, id="u0-s0-t0")
    with pytest.raises(DatasetError, match="duplicate turn id"):
        ds.history("u0")


def test_not_a_dataset(tmp_path):
    with pytest.raises(DatasetError, match="not an IBA dataset"):
        Dataset(tmp_path)


# --------------------------------------------------------------------------- issue 11: bad datasets


def _lines(path):
    return path.read_text().splitlines()


def _write(path, lines):
    path.write_text("\n".join(lines) + "\n")


def _edit_json(path, lineno, **changes):
    lines = _lines(path)
    rec = json.loads(lines[lineno - 1])
    rec.update(changes)
    lines[lineno - 1] = json.dumps(rec)
    _write(path, lines)


def test_non_utf8_byte_names_file_and_line(tmp_path):
    root = tiny_dataset(tmp_path / "ds")
    p = root / "histories" / "u0.jsonl"
    raw = p.read_bytes().split(b"\n")
    raw[1] = raw[1].replace(b"Sure.", b"Sur\xe9.")  # latin-1, not UTF-8
    p.write_bytes(b"\n".join(raw))
    with pytest.raises(DatasetError, match=r"histories/u0\.jsonl:2: not valid UTF-8 \(byte 0xe9"):
        Dataset(root).history("u0")


def test_unreadable_paths_are_dataset_errors(tmp_path):
    root = tiny_dataset(tmp_path / "ds")
    (root / "histories" / "u0.jsonl").unlink()
    (root / "histories" / "u0.jsonl").mkdir()  # a directory where the file should be
    with pytest.raises(DatasetError, match=r"u0\.jsonl: cannot read"):
        Dataset(root).history("u0")
    for bad in ("../manifest", "a\0b", ""):
        with pytest.raises(DatasetError, match="cannot name a history file"):
            Dataset(root).history(bad)


@pytest.mark.parametrize("name, field, idx", [("instances.jsonl", "instance_id", 0), ("answer_key.jsonl", "instance_id", 0),
                                              ("personas.jsonl", "id", 0)])
def test_duplicate_ids_name_the_second_line(tmp_path, name, field, idx):
    root = tiny_dataset(tmp_path / "ds")
    p = root / name
    lines = _lines(p)
    _write(p, lines + [lines[idx]])
    ds = Dataset(root)
    with pytest.raises(DatasetError, match=rf"{name}:{len(lines) + 1}: duplicate {field} '\w+' \(first on line {idx + 1}\)"):
        {"instances.jsonl": lambda: ds.instances, "answer_key.jsonl": ds.answer_keys, "personas.jsonl": lambda: ds.personas}[name]()


def test_duplicate_turn_id_in_history(tmp_path):
    root = tiny_dataset(tmp_path / "ds")
    _edit_json(root / "histories" / "u0.jsonl", 3, id="u0-s0-t0")
    with pytest.raises(DatasetError, match=r"u0\.jsonl:3: duplicate turn id 'u0-s0-t0' \(first on line 1\)"):
        Dataset(root).history("u0")


def test_out_of_order_timestamps_are_an_error(tmp_path):
    root = tiny_dataset(tmp_path / "ds")
    _edit_json(root / "histories" / "u0.jsonl", 3, timestamp="2024-12-31T23:59:59")
    with pytest.raises(DatasetError, match=r"u0\.jsonl:3: timestamp 2024-12-31T23:59:59 is earlier than line 2's"):
        Dataset(root).history("u0")


def test_timezones_compare_as_instants_and_equal_stamps_are_fine(tmp_path):
    root = tiny_dataset(tmp_path / "ds")
    p = root / "histories" / "u0.jsonl"
    _edit_json(p, 2, timestamp="2025-01-01T10:00:00")  # same as line 1: allowed
    _edit_json(p, 3, timestamp="2025-01-01T11:00:00+02:00")  # 09:00 UTC: before line 2
    with pytest.raises(DatasetError, match=r"u0\.jsonl:3: timestamp .* earlier than line 2's"):
        Dataset(root).history("u0")
    _edit_json(p, 3, timestamp="2025-01-01T12:30:00+02:00")
    assert len(Dataset(root).history("u0")) == 3


def test_bad_timestamp_is_an_error(tmp_path):
    root = tiny_dataset(tmp_path / "ds")
    _edit_json(root / "histories" / "u0.jsonl", 2, timestamp="yesterday")
    with pytest.raises(DatasetError, match=r"u0\.jsonl:2: timestamp 'yesterday' is not ISO 8601"):
        Dataset(root).history("u0")


def test_huge_turn_is_truncated_with_marker_and_warning(tmp_path, caplog):
    root = tiny_dataset(tmp_path / "ds")
    _edit_json(root / "histories" / "u0.jsonl", 2, text="x" * (MAX_TURN_CHARS * 3))
    ds = Dataset(root)
    with caplog.at_level("WARNING", logger="iba.dataset"):
        turn = ds.history("u0")[1]
        ds.history("u0")  # read again (the runner does): warned once
    assert turn.text.startswith("x" * MAX_TURN_CHARS) and turn.text.endswith("characters]")
    assert len(turn.text) < MAX_TURN_CHARS + 100
    assert len(ds.warnings) == 1 and "u0.jsonl:2:" in ds.warnings[0] and "truncated to 100,000" in ds.warnings[0]
    assert [r.getMessage() for r in caplog.records] == [f"warning: {ds.warnings[0]}"]


def test_history_limits_are_errors(tmp_path, monkeypatch):
    root = tiny_dataset(tmp_path / "ds")
    monkeypatch.setattr(dataset_mod, "MAX_HISTORY_TURNS", 2)
    with pytest.raises(DatasetError, match=r"u0\.jsonl:3: history exceeds the limit of 2 turns"):
        Dataset(root).history("u0")
    monkeypatch.setattr(dataset_mod, "MAX_HISTORY_TURNS", 100)
    monkeypatch.setattr(dataset_mod, "MAX_HISTORY_CHARS", 60)  # line 1 is 56 characters
    with pytest.raises(DatasetError, match=r"u0\.jsonl:2: history exceeds"):
        Dataset(root).history("u0")


def test_check_passes_a_good_dataset(tmp_path):
    assert Dataset(tiny_dataset(tmp_path / "ds")).check() == []


def test_check_reports_every_problem_before_a_run(tmp_path):
    root = tiny_dataset(tmp_path / "ds")
    inst = root / "instances.jsonl"
    lines = _lines(inst)
    extra = json.loads(lines[0]) | {"instance_id": "i2", "user_id": "u9"}  # no persona, no history
    _write(inst, lines + [json.dumps(extra)])
    key = root / "answer_key.jsonl"
    k0 = json.loads(_lines(key)[0])
    k0["checkpoints"][0]["evidence"] = ["u0-s0-t0", "u0-s7-t7"]
    _write(key, [json.dumps(k0), _lines(key)[1]])
    with pytest.raises(DatasetError) as e:
        Dataset(root).check()
    msg = str(e.value)
    assert "failed its check (4 problems)" in msg
    assert "instances.jsonl:3: instance 'i2': unknown user 'u9' (not in personas.jsonl)" in msg
    assert "histories/u9.jsonl: file not found" in msg
    assert "answer_key.jsonl: no answer key for instance 'i2' (instances.jsonl:3)" in msg
    assert "answer_key.jsonl:1: checkpoint 'i0-c0' of instance 'i0' cites turn 'u0-s7-t7', which is not in histories/u0.jsonl" in msg


def test_check_only_the_selected_instances_histories_and_keys(tmp_path):
    root = tiny_dataset(tmp_path / "ds")
    (root / "answer_key.jsonl").unlink()
    ds = Dataset(root)
    assert ds.check(answer_key=False) == []  # --no-score: the key is not needed
    with pytest.raises(DatasetError, match="answer_key.jsonl: no answer key: .* --answer-key PATH"):
        ds.check(ds.instances[:1])


def test_check_slot_and_label_evidence(tmp_path):
    root = tiny_dataset(tmp_path / "ds")
    key = root / "answer_key.jsonl"
    k0, k1 = (json.loads(line) for line in _lines(key))
    k0["evidence"][0]["turn_id"] = "nope-0"
    k1["slots"][0]["evidence"] = ["nope-1"]
    _write(key, [json.dumps(k0), json.dumps(k1)])
    with pytest.raises(DatasetError) as e:
        Dataset(root).check()
    assert "answer_key.jsonl:1: evidence of instance 'i0' cites turn 'nope-0'" in str(e.value)
    assert "answer_key.jsonl:2: slot 'i1-s0' of instance 'i1' cites turn 'nope-1'" in str(e.value)


def _with_shipped_taxonomy(root):
    p = root / "manifest.json"
    m = json.loads(p.read_text())
    m["taxonomy_version"] = load_taxonomy().version
    p.write_text(json.dumps(m))


def test_unknown_scenario_against_the_shipped_taxonomy(tmp_path):
    root = tiny_dataset(tmp_path / "ds")
    _with_shipped_taxonomy(root)
    assert Dataset(root).check() == []  # the tiny dataset's scenarios are real ones
    _edit_json(root / "instances.jsonl", 2, scenario="food_ordring")
    _edit_json(root / "instances.jsonl", 1, domain="daily")
    with pytest.raises(DatasetError) as e:
        Dataset(root).check()
    assert "instances.jsonl:2: instance 'i1': unknown scenario 'food_ordring'" in str(e.value)
    assert "instances.jsonl:1: instance 'i0': scenario 'technical_documentation' is in domain 'writing', not 'daily'" in str(e.value)


def test_other_taxonomies_are_not_checked(tmp_path):
    root = tiny_dataset(tmp_path / "ds")  # taxonomy_version "test": an imported dataset's own ids
    _edit_json(root / "instances.jsonl", 2, scenario="anything")
    assert Dataset(root).check() == []
    p = root / "manifest.json"
    p.write_text(json.dumps(json.loads(p.read_text()) | {"taxonomy_version": "iba-taxonomy/1+000000000000"}))
    warnings = Dataset(root).check()
    assert len(warnings) == 1 and "scenario ids not checked" in warnings[0]


def test_builder_output_passes_the_check(tmp_path):
    """The checks are strict (order, unique ids, evidence, scenarios): the builder must satisfy them."""
    from iba.construct.builder import build_dataset

    build_dataset(tmp_path / "demo", preset="demo", seed=3, progress=False)
    ds = Dataset(tmp_path / "demo")
    assert ds.manifest.taxonomy_version == load_taxonomy().version  # so scenarios were checked too
    assert ds.check() == []


def test_answer_keys_for_unknown_instances_are_a_warning(tmp_path):
    root = tiny_dataset(tmp_path / "ds")
    key = root / "answer_key.jsonl"
    _write(key, _lines(key) + [json.dumps({"instance_id": "gone"})])
    warnings = Dataset(root).check()
    assert len(warnings) == 1 and "1 answer key(s) for instances not in instances.jsonl (first: 'gone' on line 3)" in warnings[0]


def _with_states(tmp_path):
    from iba.dataset import write_dataset
    from iba.types import Persona, PersonaStateSpan

    root = tiny_dataset(tmp_path / "ds")
    ds = Dataset(root)
    span = PersonaStateSpan(state="sore_throat", description="Has a sore throat.", start="2025-01-20T00:00:00",
                            end="2025-02-03T00:00:00")
    persona = ds.personas["u0"].model_copy(update={"states": [span]})
    write_dataset(root, ds.manifest, [persona], {"u0": ds.history("u0")}, ds.instances, ds.answer_keys().values())
    return root, span


def test_persona_states_are_written_apart_and_read_by_the_evaluator(tmp_path):
    root, span = _with_states(tmp_path)
    assert "sore_throat" not in (root / "personas.jsonl").read_text()  # what agents may know: B, T, R
    assert "sore_throat" in (root / "persona_states.jsonl").read_text()
    ds = Dataset(root)
    assert ds.personas["u0"].states == [] and ds.persona_states() == {"u0": [span]}
    assert ds.evaluator_personas()["u0"].states == [span]
    assert str((root / "persona_states.jsonl").resolve()) in ds.hidden_paths
    ds.check()
    held = tmp_path / "held"
    held.mkdir()
    for name in ("answer_key.jsonl", "persona_states.jsonl"):
        (root / name).rename(held / name)
    assert Dataset(root).persona_states() == {}  # the public folder has none
    kept = Dataset(root, answer_key=held / "answer_key.jsonl")
    assert kept.persona_states() == {"u0": [span]}  # beside the held-back key
    assert str((held / "persona_states.jsonl").resolve()) in kept.hidden_paths


def test_bad_persona_states_are_named_with_file_and_line(tmp_path):
    root, _ = _with_states(tmp_path)
    line = (root / "persona_states.jsonl").read_text()
    (root / "persona_states.jsonl").write_text(line + line)
    with pytest.raises(DatasetError, match=r"persona_states.jsonl:2: duplicate user_id 'u0'"):
        Dataset(root).check()
    (root / "persona_states.jsonl").write_text(line.replace('"u0"', '"u9"'))
    with pytest.raises(DatasetError, match=r"persona_states.jsonl:1: states of user 'u9', who is not in personas.jsonl"):
        Dataset(root).check()


def test_turn_line_is_the_models_json_byte_for_byte():
    """The builder writes turns with turn_line; readers and the byte-identical build rely on it
    being exactly Turn.model_dump_json()."""
    from iba.dataset import turn_line
    from iba.types import Turn

    texts = ["plain", 'quote " and backslash \\ and slash /', "new\nline\ttab\rcr\bbs\fff", "\x00\x01\x1f\x7f",
             "Ünïcödé — “curly” ‘quotes’ … 🙂 \u2028\u2029 \ufeff", "", "<script>&amp;</script>"]
    for text in texts:
        for role in ("user", "assistant"):
            turn = Turn(id="u0001-s002-t03", session_id="u0001-s002", timestamp="2025-03-04T09:12:33+00:00", role=role, text=text)
            assert turn_line(turn.id, turn.session_id, turn.timestamp, role, text) == turn.model_dump_json(), repr(text)
