import pytest

from iba.dataset import Dataset, DatasetError
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


def test_not_a_dataset(tmp_path):
    with pytest.raises(DatasetError, match="not an IBA dataset"):
        Dataset(tmp_path)
