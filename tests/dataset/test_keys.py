"""The answer key's index: one scan per file version, one line parsed per instance."""

from __future__ import annotations

import pytest

from iba.dataset import Dataset, DatasetError
from iba.dataset import keys as keys_mod
from tests.run.helpers import tiny_dataset


def _held_back(tmp_path, n_extra: int = 0):
    """The tiny dataset with its key held back, padded with `n_extra` copies of its keys under new ids."""
    root = tiny_dataset(tmp_path / "ds")
    key = tmp_path / "held" / "answer_key.jsonl"
    key.parent.mkdir()
    lines = (root / "answer_key.jsonl").read_text().splitlines()
    extra = [lines[0].replace('"i0"', f'"x{i}"') for i in range(n_extra)]
    key.write_text("\n".join(lines + extra) + "\n")
    (root / "answer_key.jsonl").unlink()
    return root, key


def test_answer_key_for_reads_the_file_once_not_once_per_instance(tmp_path, monkeypatch):
    root, key = _held_back(tmp_path, n_extra=50)
    ds = Dataset(root, answer_key=key)
    opened: list[str] = []
    real_open = keys_mod.KeyIndex._open
    monkeypatch.setattr(keys_mod.KeyIndex, "_open", lambda self: opened.append("open") or real_open(self))

    whole = Dataset(root, answer_key=key).answer_keys()
    ids = ["i0", "i1", *(f"x{i}" for i in range(50))]
    got = {iid: ds.answer_key_for(iid) for iid in ids}
    assert got == whole  # the same keys as reading the whole file
    assert ds._key_index.scans == 1  # indexed once for 52 instances
    assert len(opened) == 1 + len(ids)  # the scan, then one seek-and-read per instance
    assert ds.answer_key_for("nope") is None and ds._key_index.scans == 1


def test_the_index_follows_an_edited_file_and_reports_bad_lines(tmp_path):
    root, key = _held_back(tmp_path)
    ds = Dataset(root, answer_key=key)
    assert ds.answer_key_for("i1") is not None and ds._key_index.scans == 1
    lines = key.read_text().splitlines()
    key.write_text("\n".join([lines[0], lines[1], lines[1]]) + "\n")  # i1 twice: a different size
    with pytest.raises(DatasetError, match=r"answer_key.jsonl:3: duplicate instance_id 'i1' \(first on line 2\)"):
        ds.answer_key_for("i1")
    assert ds._key_index.scans == 2
    key.write_text(lines[0] + "\n" + lines[1].replace('"checkpoints"', '"checkpointz"') + "\n{not json\n")
    assert ds.answer_key_for("i0").instance_id == "i0"  # the lines around it do not matter
    with pytest.raises(DatasetError, match=r"answer_key.jsonl:2: invalid AnswerKey"):
        ds.answer_key_for("i1")
    with pytest.raises(DatasetError, match=r"answer_key.jsonl:3: invalid AnswerKey"):
        ds.answer_key_for("i9")  # not indexed: the unreadable line may have been its key
