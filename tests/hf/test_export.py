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
from iba.construct.builder import build_dataset  # noqa: E402
from iba.dataset import Dataset, read_jsonl, write_jsonl  # noqa: E402
from iba.hf import HFError  # noqa: E402
from iba.hf.export import export_hf  # noqa: E402
from iba.hf.load import dataset_dir, is_export  # noqa: E402
from iba.types import AnswerKey, DistractorLabel  # noqa: E402


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
                                                            "distractors"]
    infos = {i["config_name"]: i for i in meta["dataset_info"]}
    assert infos["instances"]["splits"][0]["num_examples"] == 6
    assert {f["name"] for f in infos["answer_key"]["features"]} >= {"checkpoints", "slots", "evidence", "qa"}
    manifest = Dataset(demo_with_labels).manifest
    assert meta["license"] == "mit" and meta["iba"]["seed"] == manifest.seed
    assert meta["iba"]["generator"] == manifest.generator and meta["iba"]["held_back"] == []
    assert "Overall" in text and "E1" in text  # Table 2
    assert "Tell audit" in text and "session_length" in text
    assert json.loads((export / "iba_manifest.json").read_text()) == manifest.model_dump(mode="json")


def test_hold_back_leaves_out_key_and_distractors(demo_with_labels, tmp_path):
    out = tmp_path / "public"
    summary = export_hf(demo_with_labels, out, hold_back=True)
    assert summary["held_back"] == ["answer_key", "distractors"]
    assert not (out / "answer_key").exists() and not (out / "distractors").exists()
    text = (out / "README.md").read_text()
    assert "held back" in text
    for name in ("answer_key.jsonl", "distractors.jsonl"):  # no file holds a label
        assert not list(out.rglob(name))
    back = dataset_dir(out, tmp_path / "cache")
    assert not (back / "answer_key.jsonl").exists() and not (back / "distractors.jsonl").exists()
    assert Dataset(back).instances == Dataset(demo_with_labels).instances


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
    dataset_dir("someone/iba-bench-demo", tmp_path / "cache")
    assert asked[-1] == ("someone/iba-bench-demo", "dataset")
    dataset_dir(export, tmp_path / "cache")
    assert len(asked) == 2


def test_keys_read_back_validate(export, tmp_path):
    back = dataset_dir(export, tmp_path / "cache")
    keys = list(read_jsonl(back / "answer_key.jsonl", AnswerKey))
    assert all(isinstance(k, AnswerKey) for k in keys) and any(k.slots for k in keys)
    assert any(s.accepted for k in keys for s in k.slots)
