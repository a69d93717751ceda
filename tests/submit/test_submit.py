"""`iba submit prepare` on a store with known numbers, and `iba submit validate` on good and bad files."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from iba import prompts
from iba.cli import main
from iba.submit import recompute
from iba.submit.prepare import _modified, prepare
from iba.submit.schema import Submission, problems
from tests.report.fixed_store import build
from tests.run.helpers import as_old_store


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
    assert rag.sample.kind == "full" and rag.sample.instances == 4 and rag.sample.ids is None
    assert rag.results["overall"].n == 3 and rag.results["overall"].score == pytest.approx(65.28, abs=0.01)
    lo, hi = rag.results["overall"].ci
    assert lo <= rag.results["overall"].score <= hi
    # one scored instance in daily: a score, no interval, and the file says why
    daily = rag.results["daily"]
    assert daily.n == 1 and daily.score == pytest.approx(66.67, abs=0.01) and daily.ci is None
    assert daily.note == "n=1: a single instance has no interval"
    # per-instance results: every stored trial, with its verdicts, tokens and wall time
    by_id = {r.instance_id: r for r in rag.instances}
    assert sorted(by_id) == ["d1", "d2", "w1", "w2"]
    d1 = by_id["d1"]
    assert d1.action == "call_api" and d1.score == pytest.approx(2 / 3)
    assert d1.scores[0].scorer == "slots" and d1.scores[0].verdicts == {"s1": True, "s2": False, "s3": True}
    assert d1.usage.prompt_tokens == 100 and d1.wall_s == 1.5
    assert by_id["d2"].status == "errored" and by_id["d2"].score is None
    w1 = by_id["w1"]
    assert {(s.scorer, s.repeat) for s in w1.scores} == {("judge:J1", 0), ("judge:J1", 1), ("judge:J2", 0), ("verifiers", 0)}
    assert rag.cost.wall_s == 6.0
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
    assert any("pass_k only with trials > 1" in p for p in broken(lambda o: o["entries"][0].update(pass_k={"1": 50.0})))
    assert any("have no score" in p for p in broken(
        lambda o: o["entries"][0]["verification"].update(omitted=[], omitted_instances=False)))
    assert any("extra" in p.lower() for p in broken(lambda o: o.update(bogus=1)))
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "iba-submission/2"}')
    assert main(["submit", "validate", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "dataset: Field required" in err and "entries: Field required" in err
    bad.write_text('{"format": "iba-submission/1", "entries": []}')  # an older iba's: nothing to recompute from
    assert main(["submit", "validate", str(bad)]) == 2
    assert "no per-instance results" in capsys.readouterr().err
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
    assert recompute.problems(Submission.model_validate(obj)) == []


def _validate(tmp_path, obj, capsys, *extra: str) -> tuple[int, str]:
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(obj))
    rc = main(["submit", "validate", str(path), *extra])
    return rc, capsys.readouterr().err


def test_validate_rejects_aggregates_that_do_not_follow_from_the_results(fixed, tmp_path, capsys):
    """A file whose overall score contradicts its per-domain scores and per-instance results passed
    the schema before; now every aggregate is recomputed and each difference named."""
    ds_dir, store, _ = fixed
    good = json.loads(prepare(store, ds_dir).model_dump_json())
    assert _validate(tmp_path, good, capsys, "--dataset", str(ds_dir))[0] == 0

    def edited(change) -> tuple[int, str]:
        obj = json.loads(json.dumps(good))
        change(obj["entries"][1])  # iba: every instance scored
        return _validate(tmp_path, obj, capsys)

    def raise_overall(e):  # a better overall, its interval widened to hold it: the schema cannot tell
        e["results"]["overall"].update(score=95.0, ci=[60.0, 100.0])

    rc, err = edited(raise_overall)
    assert rc == 2 and "results.overall.score: 95.0, the results give 85.42" in err
    rc, err = edited(lambda e: e["results"]["writing"].update(score=100.0))
    assert rc == 2 and "results.writing.score: 100.0, the results give" in err

    def flip_a_verdict(e):  # the verdicts no longer give the stated scores
        d1 = next(r for r in e["instances"] if r["instance_id"] == "d1")
        d1["scores"][0]["verdicts"]["s2"] = False
    rc, err = edited(flip_a_verdict)
    assert rc == 2 and "scores[slots #0]: score 1.0, verdicts give 0.666667" in err

    def drop_an_instance(e):  # fewer results than the aggregates were computed over
        e["instances"] = [r for r in e["instances"] if r["instance_id"] != "w2"]
    rc, err = edited(drop_an_instance)
    assert rc == 2 and "results.overall.n: 4, the results give 3" in err and "counts.run: 4, the results give 3" in err
    rc, err = edited(lambda e: e["cost"]["agent"].update(prompt_tokens=1))
    assert rc == 2 and "cost.agent.prompt_tokens: 1, the results give 400" in err
    rc, err = edited(lambda e: e["instances"][0].update(wall_s=100.0))
    assert rc == 2 and "cost.wall_s" in err


def test_a_sampled_run_names_its_sample(fixed, tmp_path, capsys):
    """An entry run on some of the dataset's instances states them (and is a custom submission);
    the aggregates and omissions are over that sample."""
    ds_dir, store, _ = fixed
    db = sqlite3.connect(store)
    db.execute("DELETE FROM runs WHERE agent = 'iba' AND instance_id = 'd2'")
    db.commit()
    db.close()
    sub = prepare(store, ds_dir)
    iba = next(e for e in sub.entries if e.agent == "iba")
    assert iba.sample.kind == "subset" and iba.sample.ids == ["d1", "w1", "w2"] and iba.counts.sample == 3
    assert not iba.verification.omitted_instances and iba.results["overall"].n == 3
    assert "subset: 3 of the dataset's 4 instances" in iba.verification.details and sub.submission_type == "custom"
    obj = json.loads(sub.model_dump_json())
    assert _validate(tmp_path, obj, capsys, "--dataset", str(ds_dir))[0] == 0
    entry = next(e for e in obj["entries"] if e["agent"] == "iba")
    entry["sample"].update(ids=["d1", "d2", "w1"])  # a sample that is not what was run
    rc, err = _validate(tmp_path, obj, capsys)
    assert rc == 2 and "1 instance(s) outside the sample (first: w2)" in err
    obj["submission_type"], obj["notes"] = "standard", ""
    rc, err = _validate(tmp_path, obj, capsys)
    assert rc == 2 and "ran a third-party agent or a subset: use 'custom'" in err


def test_a_submission_written_before_the_probe_field_still_recomputes(tmp_path):
    """data/submission_before_probe_field.json: `prepare` on the fixed store by the code before
    RunRecord.probe. A QA probe was never a submission's (its scores are the report's Fig. 5d), so
    the format is unchanged: the old file recomputes clean, and an old-format store of the same runs
    prepares the same entries today."""
    old = Submission.model_validate_json((Path(__file__).parent / "data" / "submission_before_probe_field.json")
                                         .read_text(encoding="utf-8"))
    assert problems(old) == []
    ds_dir, store, _ = build(tmp_path / "fixed")
    as_old_store(store, tmp_path / "old.sqlite")
    sub = prepare(tmp_path / "old.sqlite", ds_dir)
    assert sub.dataset == old.dataset and sub.entries == old.entries
