"""Reference rows and a store's sample in `iba submit prepare`: flagged entries, sorted apart, and
the sample statement; the schema refuses a flag without its kind and more scores than the sample."""

from __future__ import annotations

import json

from iba.cli import main
from iba.dataset import Dataset
from iba.run.sample import make_sample
from iba.run.store import Store
from iba.submit.prepare import prepare
from iba.submit.schema import problems
from tests.report.test_references import write_store


def test_entries_flag_references_and_sort_them_apart(tmp_path):
    ds_dir, store, _ = write_store(tmp_path)
    sub = prepare(store, ds_dir)
    assert [(e.agent, e.reference, e.reference_kind) for e in sub.entries] == [
        ("null", True, "null"), ("rag", False, None), ("direct", True, "direct"), ("oracle", True, "oracle")]
    assert {e.agent: e.results["overall"].score for e in sub.entries} == {
        "null": 16.67, "rag": 58.33, "direct": 41.67, "oracle": 100.0}
    assert sub.sample is None
    obj = json.loads(sub.model_dump_json())
    obj["entries"][0]["reference_kind"] = None
    assert any("reference is true exactly when" in p for p in problems(obj))


def test_the_sample_goes_into_the_submission(tmp_path, capsys):
    ds_dir, store_path, did = write_store(tmp_path, agents=("rag", "oracle"))
    daily = [t for t in Dataset(ds_dir).instances if t.domain == "daily"]
    drawn = make_sample(daily, 2, 3, dataset=did, dataset_instances=4, filters={"domain": ["daily"]})
    with Store(store_path) as store:
        store.put_sample(drawn)
    out = tmp_path / "sub.json"
    assert main(["submit", "prepare", str(store_path), "--dataset", str(ds_dir), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "a sample of 2 (seed 3)" in printed and "oracle (m): 100.0 [100.0, 100.0] (n=2) [subset of 2, reference: oracle]" in printed
    obj = json.loads(out.read_text())
    assert obj["sample"] == {"n": 2, "seed": 3, "strata": ["domain", "action", "user", "scenario"],
                             "instance_ids_sha": drawn.instance_ids_sha, "pool": 2, "filters": {"domain": ["daily"]}}
    assert obj["submission_type"] == "custom" and obj["notes"].startswith("runs on a stratified sample of 2 of 2")
    assert main(["submit", "validate", str(out), "--dataset", str(ds_dir)]) == 0
    obj["sample"]["n"] = 1
    assert any("more than the sample's 1" in p for p in problems(obj))
