"""`iba stats` counts over a built demo dataset."""

from __future__ import annotations

import json

from iba.construct.stats import compute_stats, format_table2
from iba.cli import main as iba_main

REQUIRED = ("domains", "scenarios", "personas", "instances", "noise_ratio", "dynamic_checkpoint_share", "evidence_hist",
            "constraints_hist", "signal_types", "per_domain")


def test_stats_match_a_hand_count_of_the_demo(demo, demo_dir):
    s = compute_stats(demo_dir)
    keys = demo.answer_keys()
    assert s["instances"] == len(demo.instances) == 6
    assert s["personas"] == len(demo.personas) == 4
    assert s["domains"] == 2 and s["scenarios"] == 2
    assert sum(s["evidence_hist"].values()) == sum(s["constraints_hist"].values()) == 6
    turns = sum(len(demo.history(u)) for u in demo.personas)
    relevant = len({(tv.user_id, e.turn_id) for tv in demo.instances for e in keys[tv.instance_id].evidence})
    assert s["history_turns"] == turns and s["relevant_turns"] == relevant
    assert s["noise_ratio"] == round((turns - relevant) / relevant, 2)
    targets = [t for k in keys.values() for t in [*k.checkpoints, *k.slots]]
    assert s["dynamic_checkpoint_share"] == round(sum(t.kind == "dynamic" for t in targets) / len(targets), 4)
    labels = {(e.turn_id, e.dimension, e.value, e.signal_type, e.superseded) for k in keys.values() for e in k.evidence}
    assert sum(s["signal_types"].values()) == len(labels)
    assert set(s["evidence_hist"]) == {"1", "2", "3", "4", "5+"}
    for tv in demo.instances:
        n = keys[tv.instance_id].n_evidence
        assert n >= 1
    assert s["per_domain"]["daily"]["I"] + s["per_domain"]["writing"]["I"] == 6
    table = format_table2(s)
    assert "Overall" in table and "Writing and Design" in table


def test_stats_cli_json(demo_dir, capsys):
    assert iba_main(["stats", str(demo_dir), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    for k in REQUIRED:
        assert k in out
    assert (demo_dir / "stats.json").exists()


def test_stats_cli_on_a_non_dataset_says_so(tmp_path, capsys):
    assert iba_main(["stats", str(tmp_path)]) == 2
    assert "not an IBA dataset" in capsys.readouterr().err
