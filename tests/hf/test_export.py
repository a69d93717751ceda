"""`iba export hf`: parquet + card, loadable by `datasets` and pyarrow, read back record for record."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

pytest.importorskip("pyarrow")
datasets = pytest.importorskip("datasets")

from iba.cli import main  # noqa: E402
from iba.construct.builder import GENERATOR_VERSION, build_dataset  # noqa: E402
from iba.dataset import Dataset, read_jsonl, write_jsonl  # noqa: E402
from iba.hf import HFError  # noqa: E402
from iba.hf.export import export_hf  # noqa: E402
from iba.hf.load import dataset_dir, is_export  # noqa: E402
from iba.types import AnswerKey, DistractorLabel, Persona  # noqa: E402
from tests.hidden import IN_HISTORIES, evaluator_needles, found, parquet_text  # noqa: E402


@pytest.fixture(scope="module")
def demo_with_labels(tmp_path_factory) -> Path:
    """The demo build, plus what the builder on another branch adds: an evidence span on a real
    turn and a distractors.jsonl (hidden like the key)."""
    root = tmp_path_factory.mktemp("demo")
    build_dataset(root, preset="demo", seed=42, progress=False)
    ds = Dataset(root)
    keys = list(ds.answer_keys().values())
    label = keys[0].evidence[0]
    turn = next(t for t in ds.history(ds.instances[0].user_id) if t.id == label.turn_id)
    clause = turn.text[: min(20, len(turn.text))]
    keys[0].evidence[0] = label.model_copy(update={"span": (0, len(clause)), "clause": clause})
    write_jsonl(root / "answer_key.jsonl", keys)
    other = next(t for t in ds.history(ds.instances[0].user_id) if t.role == "user" and t.id != label.turn_id)
    write_jsonl(root / "distractors.jsonl", [DistractorLabel(
        user_id=ds.instances[0].user_id, turn_id=other.id, form="other_person", scenario="food_ordering",
        dimension="d", value="v", signal_type="direct_statement", span=(1, 4), clause=other.text[1:4])])
    Dataset(root).check()
    return root


@pytest.fixture(scope="module")
def export(demo_with_labels, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("hf") / "iba-bench-demo"
    export_hf(demo_with_labels, out)
    return out


def _records(root: Path) -> dict[str, list]:
    ds = Dataset(root)
    return {
        "manifest": [ds.manifest],
        "instances": ds.instances,
        "personas": list(ds.personas.values()),
        "histories": [(u, ds.history(u)) for u in sorted(ds.personas)],
        "answer_key": sorted(ds.answer_keys().values(), key=lambda k: k.instance_id),
        "distractors": list(read_jsonl(root / "distractors.jsonl", DistractorLabel)),
        "persona_states": ds.persona_states(),
    }


def test_read_back_equals_the_folder_record_for_record(demo_with_labels, export, tmp_path):
    back = dataset_dir(export, tmp_path / "cache")
    assert back != export and back.parent == tmp_path / "cache" / "hf-datasets"
    assert _records(back) == _records(demo_with_labels)
    key = {k.instance_id: k for k in Dataset(back).answer_keys().values()}
    spans = [e for k in key.values() for e in k.evidence if e.span is not None]
    assert spans and spans[0].clause  # the span fields made the trip
    assert dataset_dir(export, tmp_path / "cache") == back  # materialised once, then reused
    assert dataset_dir(demo_with_labels, tmp_path / "cache") == demo_with_labels  # a plain folder as it is


def test_datasets_and_pyarrow_load_every_config(export):
    import pyarrow.parquet as pq

    tasks = datasets.load_dataset(str(export), "instances", split="test")
    assert len(tasks) == 6 and set(tasks.column_names) >= {"instance_id", "user_id", "query", "api_schema"}
    turns = datasets.load_dataset(str(export), "histories", split="test")
    assert set(turns["user_id"]) == set(tasks["user_id"])
    key = datasets.load_dataset(str(export), "answer_key", split="test")
    assert {k["instance_id"] for k in key} == set(tasks["instance_id"])
    ev = [e for row in key for e in row["evidence"]]
    assert any(e["span"] is not None and e["clause"] for e in ev)
    dis = datasets.load_dataset(str(export), "distractors", split="test")
    assert dis[0]["form"] == "other_person" and dis[0]["span"] == [1, 4]
    # pyarrow alone, as the card says
    table = pq.read_table(export / "instances" / "test-00000-of-00001.parquet")
    assert table.num_rows == 6
    api = [json.loads(s) for s in table.column("api_schema").to_pylist() if s is not None]
    assert api and all(a["type"] == "object" for a in api)


def test_the_card_has_configs_features_license_generator_stats_and_tells(export, demo_with_labels):
    text = (export / "README.md").read_text()
    assert text.startswith("---\n")
    meta = yaml.safe_load(text.split("---\n")[1])
    assert [c["config_name"] for c in meta["configs"]] == ["instances", "histories", "personas", "answer_key",
                                                            "distractors", "persona_states"]
    infos = {i["config_name"]: i for i in meta["dataset_info"]}
    assert infos["instances"]["splits"][0]["num_examples"] == 6
    assert {f["name"] for f in infos["answer_key"]["features"]} >= {"checkpoints", "slots", "evidence", "qa"}
    manifest = Dataset(demo_with_labels).manifest
    assert meta["license"] == "mit" and meta["iba"]["seed"] == manifest.seed
    assert meta["iba"]["generator"] == manifest.generator and meta["iba"]["held_back"] == []
    assert meta["iba"]["generator_version"] == manifest.params["generator_version"] == GENERATOR_VERSION
    assert "Overall" in text and "E1" in text  # Table 2
    # one meaning per name: the tell audit is the lexical one (README), the surface AUCs are the feature audit
    tell = text.split("## Tell audit")[1].split("##")[0]
    assert "TF-IDF" in tell and "precision at N" in tell and "persona(s) and tested on" in tell
    assert "session_length" not in tell and "too few to read" in tell  # the demo's 2 test evidence turns
    assert "session_length" in text.split("## Feature audit")[1].split("##")[0]
    assert "iba iba" not in text and f"generator version {GENERATOR_VERSION}" in text
    assert "## Limitations" in text and "## Citation" in text and "@misc{iba_bench" in text
    assert json.loads((export / "iba_manifest.json").read_text()) == manifest.model_dump(mode="json")


def test_hold_back_leaves_out_key_distractors_and_states(demo_with_labels, tmp_path):
    out = tmp_path / "public"
    summary = export_hf(demo_with_labels, out, hold_back=True)
    assert summary["held_back"] == ["answer_key", "distractors", "persona_states"]
    assert not any((out / c).exists() for c in summary["held_back"])
    text = (out / "README.md").read_text()
    assert "held back" in text and "--answer-key DIR/answer_key.jsonl" in text
    for name in ("answer_key.jsonl", "distractors.jsonl", "persona_states.jsonl"):  # no file holds a label
        assert not list(out.rglob(name))
    back = dataset_dir(out, tmp_path / "cache")
    assert not any((back / n).exists() for n in ("answer_key.jsonl", "distractors.jsonl", "persona_states.jsonl"))
    assert Dataset(back).instances == Dataset(demo_with_labels).instances
    assert Dataset(back).persona_states() == {}
    # scored with the key kept elsewhere: the hidden files beside it are the evaluator's
    held = Dataset(back, answer_key=demo_with_labels / "answer_key.jsonl")
    assert held.persona_states() == Dataset(demo_with_labels).persona_states() != {}


def test_a_public_release_holds_no_state_date_or_value_of_the_key(demo_with_labels, tmp_path):
    """Every file of a held-back export, its parquet read value by value, holds none of what only the
    evaluator may know (transient states, their dates, the key's targets and texts, the labelled
    clauses); the histories hold turns and nothing else."""
    needles = evaluator_needles(demo_with_labels)
    assert needles["state"] and needles["target"] and needles["text"]  # the demo has state-driven targets
    out = tmp_path / "public"
    export_hf(demo_with_labels, out, hold_back=True)
    files = sorted(p for p in out.rglob("*") if p.is_file())
    assert {p.relative_to(out).parts[0] for p in files} == {"README.md", "iba_manifest.json", "stats.json",
                                                             "instances", "histories", "personas"}
    for path in files:
        text = parquet_text(path) if path.suffix == ".parquet" else path.read_text(encoding="utf-8")
        history = path.parent.name == "histories"
        assert found(text, needles, skip=IN_HISTORIES if history else ()) == [], path
    import pyarrow.parquet as pq

    assert pq.read_table(out / "histories" / "test-00000-of-00001.parquet").column_names == [
        "user_id", "position", "id", "session_id", "timestamp", "role", "text"]
    assert pq.read_table(out / "personas" / "test-00000-of-00001.parquet").column_names == [
        "id", "name", "background", "traits", "role"]
    # the folder an agent's run reads back: the same holds
    back = dataset_dir(out, tmp_path / "cache")
    for path in back.rglob("*.json*"):
        history = path.parent.name == "histories"
        assert found(path.read_text(encoding="utf-8"), needles, skip=IN_HISTORIES if history else ()) == [], path


def test_personas_written_before_the_split_load_and_export_their_states_hidden(demo_with_labels, tmp_path):
    """A personas.jsonl with states (as iba wrote it before) still loads, with a warning; its states
    are the evaluator's, and an export puts them in the hidden config, never in `personas`."""
    old = tmp_path / "old"
    shutil.copytree(demo_with_labels, old)
    states = Dataset(old).persona_states()
    (old / "persona_states.jsonl").unlink()
    lines = [json.dumps(p.model_dump(mode="json") | {"states": [s.model_dump() for s in states.get(p.id, [])]})
             for p in Dataset(demo_with_labels).personas.values()]
    (old / "personas.jsonl").write_text("\n".join(lines) + "\n")
    ds = Dataset(old)
    assert ds.persona_states() == states
    assert any("transient states" in w and "do not publish" in w for w in ds.warnings)
    assert ds.evaluator_personas()["u0000"].states == states["u0000"]
    out = tmp_path / "hf"
    export_hf(old, out)
    import pyarrow.parquet as pq

    assert "states" not in pq.read_table(out / "personas" / "test-00000-of-00001.parquet").column_names
    back = Dataset(dataset_dir(out, tmp_path / "cache"))
    assert back.persona_states() == states and (back.root / "persona_states.jsonl").exists()
    written = [Persona.model_validate_json(line) for line in (back.root / "personas.jsonl").read_text().splitlines()]
    assert written and not any(p.states for p in written)


def test_cli_export_and_bad_input(demo_with_labels, tmp_path, capsys):
    out = tmp_path / "hf"
    assert main(["export", "hf", str(demo_with_labels), str(out)]) == 0
    assert "instances: 6 rows" in capsys.readouterr().out and is_export(out)
    assert main(["export", "hf", str(demo_with_labels), str(out)]) == 0  # an earlier export is replaced
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    assert main(["export", "hf", str(demo_with_labels), str(busy)]) == 2
    assert "not an earlier export" in capsys.readouterr().err and (busy / "notes.txt").exists()
    (tmp_path / "afile").write_text("x")
    assert main(["export", "hf", str(demo_with_labels), str(tmp_path / "afile")]) == 2
    assert "is not a folder" in capsys.readouterr().err
    assert main(["export", "hf", str(tmp_path / "nothing"), str(tmp_path / "o")]) == 2
    assert "not an IBA dataset" in capsys.readouterr().err


def test_a_bad_parquet_row_names_file_and_row(export, tmp_path):
    import pyarrow.parquet as pq

    bad = tmp_path / "bad"
    shutil.copytree(export, bad)
    path = bad / "instances" / "test-00000-of-00001.parquet"
    table = pq.read_table(path)
    rows = table.to_pylist()
    rows[2]["action"] = "dance"
    pq.write_table(table.from_pylist(rows, schema=table.schema), path)
    with pytest.raises(HFError, match=r"instances/test-00000-of-00001.parquet: row 2: invalid TaskView"):
        dataset_dir(bad, tmp_path / "cache")
    assert not list((tmp_path / "cache" / "hf-datasets").glob("*/manifest.json"))  # nothing half-written


def test_hub_ids_download_only_when_asked(monkeypatch, export, tmp_path):
    """A hub id goes to huggingface_hub's snapshot_download (faked here: no network in tests);
    an existing folder never does."""
    import huggingface_hub

    asked = []

    def fake_download(repo_id, repo_type):
        asked.append((repo_id, repo_type))
        return str(export)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_download)
    back = dataset_dir("hf:someone/iba-bench-demo", tmp_path / "cache")
    assert asked == [("someone/iba-bench-demo", "dataset")] and (back / "manifest.json").exists()
    # a two-part path that does not exist is a missing folder (a typo), never a download
    with pytest.raises(HFError, match=r"someone/iba-bench-demo: no such dataset folder; .* write hf:someone/iba-bench-demo"):
        dataset_dir("someone/iba-bench-demo", tmp_path / "cache")
    with pytest.raises(HFError, match=r"no such dataset folder$"):
        dataset_dir(tmp_path / "a" / "b" / "c", tmp_path / "cache")
    dataset_dir(export, tmp_path / "cache")
    assert len(asked) == 1


def test_keys_read_back_validate(export, tmp_path):
    back = dataset_dir(export, tmp_path / "cache")
    keys = list(read_jsonl(back / "answer_key.jsonl", AnswerKey))
    assert all(isinstance(k, AnswerKey) for k in keys) and any(k.slots for k in keys)
    assert any(s.accepted for k in keys for s in k.slots)


def test_report_score_and_submit_read_an_export_as_run_does(tmp_path, capsys):
    """`iba report` refused an export folder that `iba run` and `iba submit prepare` took."""
    from tests.run.helpers import tiny_dataset

    root = Path(__file__).resolve().parents[2]
    out = tmp_path / "export"
    export_hf(tiny_dataset(tmp_path / "ds"), out)
    store, cache = tmp_path / "s.sqlite", tmp_path / "cache"
    agent = f"external?cmd=python {root / 'examples' / 'external_agent.py'}"
    assert main(["run", str(out), "--agent", agent, "--model", "openai:none", "--base-url", "http://127.0.0.1:9/v1",
                 "--judges", "none", "--store", str(store), "--cache-dir", str(cache), "--quiet"]) == 0
    assert main(["score", str(store), "--dataset", str(out), "--cache-dir", str(cache), "--judges", "none",
                 "--quiet"]) == 0
    assert main(["report", str(store), "--dataset", str(out), "--cache-dir", str(cache),
                 "--out", str(tmp_path / "report")]) == 0
    assert main(["submit", "prepare", str(store), "--dataset", str(out), "--cache-dir", str(cache),
                 "--out", str(tmp_path / "sub.json")]) == 0
    capsys.readouterr()
