"""`iba submit prepare` on a store with known numbers, and `iba submit validate` on good and bad files."""

from __future__ import annotations

import json

import pytest

from iba import prompts
from iba.cli import main
from iba.submit.prepare import _modified, prepare
from iba.submit.schema import Submission, problems
from tests.report.fixed_store import build


@pytest.fixture()
def fixed(tmp_path):
    return build(tmp_path)


def test_prepare_gives_each_row_its_scores_omissions_and_judges(fixed, tmp_path):
    ds_dir, store, did = fixed
    sub = prepare(store, ds_dir)
    assert sub.dataset.id == did and sub.dataset.instances == 4 and sub.dataset.per_domain == {"writing": 2, "daily": 2}
    entries = {e.agent: e for e in sub.entries}
    assert set(entries) == {"rag", "iba", "iba?retrieval=false"}
    rag = entries["rag"]
    # rag's d2 errored: omitted, and its Overall is over w1, w2, d1 as in the report (65.3)
    assert rag.verification.omitted == ["d2"] and rag.verification.omitted_instances
    assert "1 errored" in rag.verification.details and rag.counts.errored == 1
    assert rag.results["overall"].n == 3 and rag.results["overall"].score == pytest.approx(65.28, abs=0.01)
    assert rag.results["daily"].n == 1 and rag.results["daily"].score == pytest.approx(66.67, abs=0.01)
    lo, hi = rag.results["overall"].ci
    assert lo <= rag.results["overall"].score <= hi
    iba = entries["iba"]
    assert iba.results["overall"].n == 4 and not iba.verification.omitted_instances  # its own instances, not the intersection
    assert entries["iba?retrieval=false"].counts.failed == 0 and entries["iba?retrieval=false"].results["daily"].n == 2
    assert rag.pass_k is None and rag.trials == 1
    assert rag.cost.agent.llm_calls == 8 and rag.cost.agent.prompt_tokens == 400  # 4 records x (2 calls, 100 tokens)
    assert {j.model for j in sub.judges} == {"J1", "J2"} and {j.model: j.repeats for j in sub.judges} == {"J1": 2, "J2": 1}
    assert all(j.judge_check is None for j in sub.judges)  # never calibrated: said as null
    assert sub.submission_type == "custom" and "d2" not in sub.notes and "errored" in sub.notes


def test_prices_give_a_cost(fixed):
    ds_dir, store, _ = fixed
    sub = prepare(store, ds_dir, usd_per_mtok=(1.0, 2.0))
    e = next(e for e in sub.entries if e.agent == "iba")
    tin = e.cost.agent.prompt_tokens + e.cost.judges.prompt_tokens
    tout = e.cost.agent.completion_tokens + e.cost.judges.completion_tokens
    assert e.cost.usd == pytest.approx((tin + 2 * tout) / 1e6)


def test_modified_prompts_are_those_not_shipped():
    name = prompts.names()[0]
    assert _modified({name: prompts.template_hash(name)}) == []
    assert _modified({name: "0" * 16, "my_prompt": "1" * 16}) == sorted([name, "my_prompt"])


def test_cli_prepare_validate_and_the_checks_that_bite(fixed, tmp_path, capsys):
    ds_dir, store, _ = fixed
    out = tmp_path / "submission.json"
    assert main(["submit", "prepare", str(store), "--dataset", str(ds_dir), "--out", str(out), "--name", "A",
                 "--reference", "code=https://github.com/x/y"]) == 0
    assert "3 entries" in capsys.readouterr().out
    assert main(["submit", "validate", str(out), "--dataset", str(ds_dir)]) == 0
    good = json.loads(out.read_text())
    assert good["references"] == [{"title": "code", "url": "https://github.com/x/y", "type": "github"}]

    def broken(change) -> list[str]:
        obj = json.loads(out.read_text())
        change(obj)
        return problems(obj)

    assert any("omitted_instances must be true" in p for p in broken(
        lambda o: o["entries"][0]["verification"].update(omitted_instances=False)))
    assert any("does not hold the score" in p for p in broken(
        lambda o: o["entries"][0]["results"]["overall"].update(ci=[90.0, 99.0])))
    assert any("use 'custom'" in p for p in broken(lambda o: o.update(submission_type="standard")))
    assert any("pass_k needs exactly the keys" in p for p in broken(lambda o: o["entries"][0].update(trials=2)))
    assert any("have no score" in p for p in broken(
        lambda o: o["entries"][0]["verification"].update(omitted=[], omitted_instances=False)))
    assert any("extra" in p.lower() for p in broken(lambda o: o.update(bogus=1)))
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "iba-submission/1"}')
    assert main(["submit", "validate", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "dataset: Field required" in err and "entries: Field required" in err
    bad.write_text("{not json")
    assert main(["submit", "validate", str(bad)]) == 2 and "bad.json:1: not JSON" in capsys.readouterr().err
    # a file made on another dataset is caught with --dataset
    other = json.loads(out.read_text())
    other["dataset"]["seed"] = 999
    bad.write_text(json.dumps(other))
    assert main(["submit", "validate", str(bad), "--dataset", str(ds_dir)]) == 2
    assert "dataset.seed: 999 in the file, 1 in" in capsys.readouterr().err


def test_cli_prepare_bad_input(fixed, tmp_path, capsys):
    ds_dir, store, _ = fixed
    assert main(["submit", "prepare", str(tmp_path / "none.sqlite"), "--dataset", str(ds_dir), "--out", str(tmp_path / "o.json")]) == 2
    assert "no such store" in capsys.readouterr().err
    assert main(["submit", "prepare", str(store), "--dataset", str(ds_dir), "--out", str(tmp_path)]) == 2
    assert "is a folder" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["submit", "prepare", str(store), "--dataset", str(ds_dir), "--out", str(tmp_path / "o.json"),
              "--usd-per-mtok", "cheap"])
    assert "PROMPT,COMPLETION prices" in capsys.readouterr().err


def test_a_standard_submission_validates(fixed):
    ds_dir, store, _ = fixed
    sub = prepare(store, ds_dir, runs=["main"])
    obj = json.loads(sub.model_dump_json())
    obj["entries"] = [e for e in obj["entries"] if e["agent"] == "iba"]  # every instance scored, shipped prompts
    obj["submission_type"], obj["notes"] = "standard", ""
    assert problems(obj) == [] and Submission.model_validate(obj).submission_type == "standard"
