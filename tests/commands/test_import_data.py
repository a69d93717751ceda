from iba.cli import main

from tests.adapters.conftest import ITEMS


def test_import_prefeval_command_prints_counts(prefeval_dir, tmp_path, capsys):
    out = tmp_path / "ds"
    rc = main(["import", "prefeval", str(prefeval_dir), "--out", str(out), "--form", "persona", "--filler-turns", "3", "--topics", "kitchen_tools"])
    assert rc == 0
    text = capsys.readouterr().out
    assert f"users/instances {len(ITEMS['kitchen_tools'])}" in text
    assert "located 1, unlocated 1" in text
    assert (out / "manifest.json").exists()


def test_import_prefeval_bad_topic_lists_available(prefeval_dir, tmp_path, capsys):
    rc = main(["import", "prefeval", str(prefeval_dir), "--out", str(tmp_path / "ds"), "--topics", "nope"])
    assert rc == 2
    err = capsys.readouterr().err
    assert "unknown topic(s) nope" in err and "garden_plans, kitchen_tools" in err


def test_import_limit_keeps_first_items_per_topic(prefeval_dir, tmp_path, capsys):
    rc = main(["import", "prefeval", str(prefeval_dir), "--out", str(tmp_path / "ds"), "--limit", "1", "--filler-turns", "0"])
    assert rc == 0
    assert f"users/instances {len(ITEMS)}" in capsys.readouterr().out  # one per topic
    assert main(["import", "prefeval", str(prefeval_dir), "--out", str(tmp_path / "ds"), "--limit", "0"]) == 2
