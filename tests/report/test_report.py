"""A report built from a fixed, hand-made store reproduces numbers computed by hand.

Instance scores (the combination rule: per judge the mean over repeats of the checkpoint mean,
then the mean over judges; CallAPI: the slot mean):
  rag:  w1 J1 (1/2 + 1)/2 = 3/4, J2 1 (c2 unscored)  -> 7/8
        w2 J1 (2/3 + 1/3)/2 = 1/2, J2 1/3            -> 5/12
        d1 2/3;  d2 errored -> unscored
  iba:  w1 1; w2 J1 (1 + 2/3)/2 = 5/6, J2 1 -> 11/12; d1 1; d2 1/2
  iba?retrieval=false: w1 J1 1/2, J2 0 -> 1/4; w2 1/3; d1 invalid -> 0; d2 1
"""

from __future__ import annotations

import csv
import math

import pytest

from iba.report.build import build_report
from tests.report.fixed_store import build

RAG = {"w1": 7 / 8, "w2": 5 / 12, "d1": 2 / 3}
IBA = {"w1": 1.0, "w2": 11 / 12, "d1": 1.0, "d2": 0.5}
ABL = {"w1": 1 / 4, "w2": 1 / 3, "d1": 0.0, "d2": 1.0}


def m(*xs):
    return sum(xs) / len(xs)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("report")
    ds, store, did = build(tmp)
    html = build_report(store, [ds], tmp / "out")
    return tmp / "out", html


def read_csv(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _f(v):
    return f"{100 * v:.1f}"


def test_table4_markdown_exact(report):
    """Rows are compared on the same instances: rag's d2 errored, so d2 leaves every row."""
    out, _ = report
    assert set(RAG) == {"w1", "w2", "d1"}  # the fixture's rag run of d2 errored
    rag_w, rag_d, rag_o = m(RAG["w1"], RAG["w2"]), RAG["d1"], m(RAG["w1"], RAG["w2"], RAG["d1"])
    iba_w, iba_d, iba_o = m(IBA["w1"], IBA["w2"]), IBA["d1"], m(IBA["w1"], IBA["w2"], IBA["d1"])
    abl_w, abl_d, abl_o = m(ABL["w1"], ABL["w2"]), ABL["d1"], m(ABL["w1"], ABL["w2"], ABL["d1"])
    # before the same-instance rule iba's Overall pooled d2 as well
    assert _f(iba_o) != _f(m(*IBA.values()))
    md = (out / "table4.md").read_text()
    assert "| Agent (model) | Writing | Daily | Overall |" in md
    assert f"| rag (m) | {_f(rag_w)} | {_f(rag_d)} | {_f(rag_o)} |" in md
    assert f"| iba (m) | {_f(iba_w)} | {_f(iba_d)} | {_f(iba_o)} |" in md
    assert f"| iba?retrieval=false (m) | {_f(abl_w)} | {_f(abl_d)} | {_f(abl_o)} |" in md
    assert "same 3 instance(s); 1 left out for every row (rag (m): 1 errored" in md
    rows = read_csv(out / "table4.csv")
    assert rows[0] == {"Agent (model)": "rag (m)", "Writing": _f(rag_w), "Daily": _f(rag_d), "Overall": _f(rag_o)}
    left = read_csv(out / "left_out.csv")
    assert {(r["row"], r["why"]) for r in left} == {("rag (m)", "errored"), ("iba (m)", "another row"),
                                                     ("iba?retrieval=false (m)", "another row")}


def test_cells_have_n_and_unscored(report):
    out, _ = report
    cells = {(r["row"], r["domain"]): r for r in read_csv(out / "cells.csv")}
    daily = cells[("rag (m)", "Daily")]
    assert (daily["n"], daily["unscored"]) == ("1", "0")
    assert float(daily["score"]) == pytest.approx(100 * RAG["d1"], abs=1e-6)
    assert cells[("rag (m)", "Overall")]["n"] == "3" and cells[("iba (m)", "Overall")]["n"] == "3"


def test_ablation_deltas(report):
    out, _ = report
    md = (out / "table5.md").read_text()
    iba = [m(IBA["w1"], IBA["w2"]), IBA["d1"], m(IBA["w1"], IBA["w2"], IBA["d1"])]
    abl = [m(ABL["w1"], ABL["w2"]), ABL["d1"], m(ABL["w1"], ABL["w2"], ABL["d1"])]
    assert "| iba (m) | " + " | ".join(_f(v) for v in iba) + " |" in md
    arrows = []
    for a, b in zip(abl, iba):
        d = round(100 * a, 1) - round(100 * b, 1)
        arrow = "\u2193" if d < 0 else "\u2191"
        arrows.append(f"{_f(a)} {arrow} {abs(100 * (a - b)):.1f}")
    assert "| iba?retrieval=false | " + " | ".join(arrows) + " |" in md


def test_table9_for_the_repeated_judge(report):
    out, _ = report
    md = (out / "table9_J1.md").read_text()
    # rag, J1 alone: repeat 0 Writing (1/2 + 2/3)/2 = 7/12, repeat 1 (1 + 1/3)/2 = 2/3
    w0, w1 = 100 * 7 / 12, 100 * 2 / 3
    sd_w = abs(w1 - w0) / math.sqrt(2)
    o0, o1 = 100 * m(1 / 2, 2 / 3, 2 / 3), 100 * m(1, 1 / 3, 2 / 3)
    sd_o = abs(o1 - o0) / math.sqrt(2)
    line = f"| rag (m) | {m(w0, w1):.1f} \u00b1 {sd_w:.2f} | 66.7 \u00b1 0.00 | {m(o0, o1):.1f} \u00b1 {sd_o:.2f} |"
    assert line == "| rag (m) | 62.5 \u00b1 5.89 | 66.7 \u00b1 0.00 | 63.9 \u00b1 3.93 |"
    assert line in md
    assert not (out / "table9_J2.md").exists()  # one repeat: no spread to report


def test_figure5_numbers(report):
    out, _ = report
    ev = {(r["row"], r["x"]): r for r in read_csv(out / "fig5a_evidence.csv")}
    assert float(ev[("rag (m)", "1")]["value"]) == pytest.approx(100 * 5 / 12, abs=1e-4)
    assert float(ev[("rag (m)", "2")]["value"]) == pytest.approx(87.5)
    assert float(ev[("rag (m)", "3")]["value"]) == pytest.approx(100 * 2 / 3, abs=1e-4)
    assert ev[("rag (m)", "5+")]["value"] == "" and ev[("rag (m)", "5+")]["n"] == "0"
    assert float(ev[("iba (m)", "5+")]["value"]) == pytest.approx(50.0)
    cons = {(r["row"], r["x"]): r for r in read_csv(out / "fig5b_constraints.csv")}
    assert float(cons[("rag (m)", "2-3")]["value"]) == pytest.approx(100 * m(7 / 8, 5 / 12, 2 / 3), abs=1e-4)
    sd = {(r["row"], r["x"]): r for r in read_csv(out / "fig5c_static_dynamic.csv")}
    # rag static targets: w1.c1 1, w2.c1 (1+0)/2, w2.c2 (1/2+0)/2, d1.s1 1, d1.s3 1 -> 3.75/5
    # dynamic: w1.c2 1/2 (J2 unscored), w2.c3 (0+1)/2, d1.s2 0 -> 1/3
    assert float(sd[("rag (m)", "static")]["value"]) == pytest.approx(75.0)
    assert float(sd[("rag (m)", "dynamic")]["value"]) == pytest.approx(100 / 3, abs=1e-4)
    assert sd[("rag (m)", "static")]["n"] == "5"
    qa = {(r["row"], r["x"]): r for r in read_csv(out / "fig5d_qa_vs_task.csv")}
    assert float(qa[("rag (m)", "QA")]["value"]) == pytest.approx(50.0)
    assert float(qa[("rag (m)", "Task")]["value"]) == pytest.approx(100 * m(7 / 8, 5 / 12), abs=1e-4)
    for name in ("fig4_domains", "fig5a_evidence", "fig5b_constraints", "fig5c_static_dynamic", "fig5d_qa_vs_task"):
        assert (out / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_agreement_between_judges(report):
    out, _ = report
    rows = {r["Comparison"]: r for r in read_csv(out / "agreement.csv")}
    # J1 vs J2 at repeat 0, items where both scored (rag w1.c2 dropped):
    pairs = [(1, 1), (1, 0), (1, 0), (0, 1)] + [(1, 1)] * 5 + [(0, 0), (1, 0), (1, 1), (0, 0), (0, 0)]
    po = sum(a == b for a, b in pairs) / len(pairs)  # 10/14
    pi1 = sum(a + b for a, b in pairs) / (2 * len(pairs))  # 18/28
    pe = 2 * pi1 * (1 - pi1)
    row = rows["J1 vs J2"]
    assert row["items"] == "14"
    assert row["raw"] == f"{po:.3f}" and row["AC1"] == f"{(po - pe) / (1 - pe):.3f}"
    assert "J1: 2 repeats" in rows and "J1 vs verifiers" in rows


def test_cost_table(report):
    out, _ = report
    row = read_csv(out / "cost.csv")[0]
    # rag: 4 task + 2 QA runs; calls 4*2 + 2*1; tokens 4*100 + 2*10 (4*30 reused) and 4*20 + 2*1; wall 4*1.5 + 2*.5
    # judge: w1 3 passes x 2 checkpoints + w2 3 x 3 = 15 calls; 6 records x 60 tokens
    assert list(row.values()) == ["rag (m)", "4", "2", "1", "10", "420", "120", "82", "7", "1.17", "15", "360"]


def test_html_is_self_contained_escaped_and_ranked(report):
    _, html = report
    text = html.read_text()
    assert "<script>" not in text and "&lt;script&gt;" in text
    assert "http://" not in text and "https://" not in text
    assert '<td class="num best">95.8</td>' in text  # iba best in Writing
    assert '<td class="num second">64.6</td>' in text  # rag second
    assert text.count("data:image/png;base64,") == 5
    assert 'id="run-rag-w1"' in text
    assert 'class="turn gold" id="turn-u1-t10"' in text and 'class="turn old" id="turn-u1-t04"' in text
    assert "Document the &lt;export&gt; API." in text


def test_history_window_shows_context_not_everything():
    from iba.report.html import history_window
    from tests.report.fixed_store import _turns

    hist = _turns("u", 30)
    out = history_window(hist, {"u-t10": "d=v"}, set(), width=2)
    shown = [t.id for t in hist if f'id="turn-{t.id}"' in out]
    assert shown == ["u-t08", "u-t09", "u-t10", "u-t11", "u-t12"]
    assert "... 8 turns ..." in out and "... 17 turns ..." in out


def test_judges_filter_changes_the_numbers(tmp_path):
    ds, store, _ = build(tmp_path)
    build_report(store, [ds], tmp_path / "o", judges=["J2"])
    md = (tmp_path / "o" / "table4.md").read_text()
    # rag with J2 only: w1 1, w2 1/3 -> Writing 66.7; Overall (1 + 1/3 + 2/3)/3 = 66.7
    assert "| rag (m) | 66.7 | 66.7 | 66.7 |" in md


def test_report_without_dataset_still_gives_table4(tmp_path):
    _, store, _ = build(tmp_path)
    html = build_report(store, [], tmp_path / "o2")
    assert "| rag (m) | 64.6 | 66.7 | 65.3 |" in (tmp_path / "o2" / "table4.md").read_text()
    assert html.exists() and not (tmp_path / "o2" / "fig5a_evidence.png").exists()


def test_agent_trials_give_a_panel_table9(tmp_path):
    """Two trials of one agent: Table 4 averages the trials per instance, Table 9 spreads them."""
    from iba.dataset import Dataset
    from iba.dataset import dataset_id
    from iba.run.store import Store
    from iba.types import Action, RunRecord, ScoreRecord, Verdict
    from tests.report.fixed_store import NOW

    ds, _, _ = build(tmp_path)
    did = dataset_id(Dataset(ds))
    store_path = tmp_path / "trials.sqlite"
    # trial 0: w1 1, d1 2/3; trial 1: w1 1/2, d1 1/3
    plan = {("w1", 0): [True, True], ("w1", 1): [True, False],
            ("d1", 0): [True, False, True], ("d1", 1): [True, False, False]}
    with Store(store_path) as s:
        for (iid, trial), passed in plan.items():
            gen = iid == "w1"
            rk = f"{iid}-{trial}"
            s.put_run(RunRecord(key=rk, run="t", dataset=did, instance_id=iid, user_id="u1" if gen else "u2",
                                domain="writing" if gen else "daily",
                                scenario="technical_documentation" if gen else "food_ordering", agent="rag", model="m",
                                trial=trial, status="ok",
                                action=Action(kind="generate", text="x") if gen else Action(kind="call_api", params={}),
                                started_at=NOW, iba_version="0"))
            vs = [Verdict(target=f"{'c' if gen else 's'}{i + 1}", kind="checkpoint" if gen else "slot",
                          judge="J1" if gen else "slot-match", passed=p) for i, p in enumerate(passed)]
            s.put_score(ScoreRecord(run_key=rk, scorer="judge:J1" if gen else "slots", verdicts=vs,
                                    score=sum(passed) / len(passed)))
    out = tmp_path / "o"
    build_report(store_path, [ds], out)
    assert "| rag (m) | 75.0 | 50.0 | 62.5 |" in (out / "table4.md").read_text()
    sd_w, sd_d = 50 / math.sqrt(2), (100 / 3) / math.sqrt(2)
    sd_o = (100 * m(1, 2 / 3) - 100 * m(1 / 2, 1 / 3)) / math.sqrt(2)
    line = f"| rag (m) | 75.0 \u00b1 {sd_w:.2f} | 50.0 \u00b1 {sd_d:.2f} | 62.5 \u00b1 {sd_o:.2f} |"
    assert line == "| rag (m) | 75.0 \u00b1 35.36 | 50.0 \u00b1 23.57 | 62.5 \u00b1 29.46 |"
    assert line in (out / "table9.md").read_text()


def test_ci_and_paired_tables_use_the_same_instances(report):
    out, _ = report
    ci = {r["Agent (model)"]: r for r in read_csv(out / "ci.csv")}
    assert ci["rag (m)"]["n"] == "3" and ci["iba (m)"]["n"] == "3"
    assert float(ci["iba (m)"]["Overall"]) == pytest.approx(100 * m(IBA["w1"], IBA["w2"], IBA["d1"]), abs=0.05)
    pairs = {r["A \u2212 B"]: r for r in read_csv(out / "paired.csv")}
    rag_iba = pairs["rag (m) \u2212 iba (m)"]
    want = m(*(RAG[k] - IBA[k] for k in ("w1", "w2", "d1")))
    assert rag_iba["n"] == "3" and float(rag_iba["diff"]) == pytest.approx(100 * want, abs=0.05)
    assert rag_iba["wins/losses/ties"] == "0/3/0"


def test_judges_without_a_calibration_are_warned(report):
    out, _ = report
    md = (out / "judges.md").read_text()
    assert "J1" in md and "WARNING" in md and "iba judge-check" in md


def test_qa_vs_task_uses_the_probes_every_row_answered(tmp_path):
    """iba answered q1 only: rag's QA accuracy is then over q1 as well (not over q1 and q2)."""
    from iba.report.analyses import qa_vs_task
    from iba.report.data import load_report_data
    from iba.run.store import Store
    from iba.types import Action, RunRecord, ScoreRecord, Verdict
    from tests.report.fixed_store import build

    ds, path, did = build(tmp_path)
    with Store(path) as s:
        s.put_run(RunRecord(key="iba-w1-q1", run="main", dataset=did, instance_id="w1", probe="q1", user_id="u1",
                            domain="writing", scenario="technical_documentation", agent="iba", model="m",
                            status="ok", action=Action(kind="generate", text="Answer: B"),
                            started_at="2025-01-01T00:00:00", iba_version="0"))
        s.put_score(ScoreRecord(run_key="iba-w1-q1", scorer="qa", score=0.0,
                                verdicts=[Verdict(target="q1", kind="qa", judge="qa-parse", passed=False)]))
    series = qa_vs_task(load_report_data(path, [ds]))
    assert series["rag (m)"]["QA"] == (100.0, 1) and series["iba (m)"]["QA"] == (0.0, 1)
    assert "iba?retrieval=false (m)" not in series  # asked no probes


def test_unsandboxed_rows_and_judge_faults_are_named(tmp_path):
    """A row whose third-party command ran without a sandbox is labelled so in every table, and an
    instance whose judge call failed is left out as 'judge errored' (judged again by a rerun)."""
    from iba.dataset import Dataset
    from iba.report.data import load_report_data
    from iba.dataset import dataset_id
    from iba.run.store import Store
    from iba.types import Action, RunRecord, ScoreRecord, Verdict
    from tests.run.helpers import tiny_dataset

    ds = tiny_dataset(tmp_path / "ds")
    did = dataset_id(Dataset(ds))
    with Store(tmp_path / "s.sqlite") as s:
        for agent, sandbox in (("external?cmd=a", "none"), ("external?cmd=b", "bwrap")):
            for iid, kind in (("i0", "generate"), ("i1", "call_api")):
                rk = f"{agent}-{iid}"
                action = (Action(kind="generate", text="t") if kind == "generate"
                          else Action(kind="call_api", api_name="order_food", params={"texture": "soft"}))
                s.put_run(RunRecord(key=rk, run="r", dataset=did, instance_id=iid, user_id="u0",
                                    domain="writing" if iid == "i0" else "daily", scenario="x", agent=agent, model="m",
                                    status="ok", action=action, started_at="2025-01-01T00:00:00", iba_version="0",
                                    sandbox=sandbox))
                if kind == "call_api":
                    s.put_score(ScoreRecord(run_key=rk, scorer="slots", score=1.0, verdicts=[
                        Verdict(target="i1-s0", kind="slot", judge="slot-match", passed=True)]))
                else:
                    fault = agent.endswith("a")
                    s.put_score(ScoreRecord(run_key=rk, scorer="judge:J", score=None if fault else 1.0, errored=fault,
                                            verdicts=[Verdict(target="i0-c0", kind="checkpoint", judge="J",
                                                              passed=None if fault else True, errored=fault)]))
    data = load_report_data(tmp_path / "s.sqlite", [ds])
    assert sorted(r.label for r in data.rows) == ["external?cmd=a (own model) [unsandboxed]", "external?cmd=b (own model)"]
    assert {(x["row"], x["instance_id"], x["why"]) for x in data.left_out} == {
        ("external?cmd=a (own model) [unsandboxed]", "i0", "judge errored"), ("external?cmd=b (own model)", "i0", "another row")}


def test_a_row_without_scores_is_left_out_and_named_not_every_row_blanked(tmp_path):
    """Before: one agent with no scored instance yet made Table 4 show "-" for every row ("No task
    runs scored by every row"). Now the others are compared on their common instances."""
    from iba.run.store import Store

    ds, store, _ = build(tmp_path)
    with Store(store) as s:
        for r in [r for r in s.runs() if r.agent == "iba"]:
            s.put_run(r.model_copy(update={"key": r.key + "-late", "agent": "late"}))  # stored, not scored yet
    build_report(store, [ds], tmp_path / "o")
    md = (tmp_path / "o" / "table4.md").read_text()
    assert "| rag (m) | 64.6 | 66.7 | 65.3 |" in md and "| late (m) | – | – | – |" in md
    assert "Left out, with no scored instance yet" in md and "late (m)" in md.split("Left out")[1]
    from iba.report.data import load_report_data
    from iba.report.overall import overall_lines

    lines = overall_lines(load_report_data(store, [ds]))
    assert lines[0].startswith("overall, every row on the same 3 instance(s)")
    assert any(line.startswith("  rag (m): 65.3 [") and "(n=3)" in line and "1 errored" in line for line in lines)
    assert "  late (m): no scored instance yet, left out of the comparison (0 failed (scored 0), 0 errored, " \
           "4 unscored of 4 run)" in lines


def test_the_header_names_the_dataset_and_its_generator_version(report):
    from iba.report.build import dataset_line
    from iba.types import Manifest

    out, html = report
    assert "Dataset fixed@" in (out / "report.md").read_text() and "test (no generator version, writer procedural, seed 1" \
        in (out / "report.md").read_text()
    assert "no generator version" in html.read_text()
    m = Manifest(name="x", generator="iba.construct", seed=7, taxonomy_version="t", created_by="iba 0.1.0",
                 counts={}, params={"generator_version": 2})
    assert dataset_line(m) == "iba.construct (generator version 2, writer procedural, seed 7, taxonomy t)"
