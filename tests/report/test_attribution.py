"""The attribution table (retrieved x applied per checkpoint/slot) and fig4's error bars, on the
fixed store, against numbers computed by hand.

Compared instances: w1, w2, d1 (rag errored on d2). Per-target pass values (mean over judges of
the mean over repeats; slots: the verdict), retrieved from the traces in fixed_store.TRACES:
  rag   w1.c1 1 R, w1.c2 1/2 (J2 unscored), w2.c1 1/2, w2.c2 1/4, w2.c3 1/2 (w2 kept u1-t05: none R),
        d1.s1 1 R, d1.s2 0 R, d1.s3 1
        -> R&A 1+1+0 = 2, R&notA 1, notR&A 1/2+1/2+1/4+1/2+1 = 2.75, notR&notA 2.25; applied 4.75/8
  iba   every target 1 except w2.c3 (J1 (1+0)/2, J2 1 -> 3/4); kept (reranked) u1-t10, u1-t20,
        u2-t01, u2-t05: w1.c2 (found by search, dropped by the reranker) and d1.s2 not R
        -> R&A 1+1+1+3/4+1+1 = 5.75, R&notA 0.25, notR&A 2, notR&notA 0; applied 7.75/8
        named: w1.c1 (tables), w2.c1, w2.c2 (first person), d1.s1 (Italian), d1.s2 (mild)
        -> retrieved 6/8, retrieved and named 4/8, and applied 4/8
  abl   w1.c1 0, w1.c2 1/2 R, w2 1, 0, 0, d1 invalid 0, 0 R, 0 R
        -> R&A 0.5, R&notA 2.5, notR&A 1, notR&notA 4; applied 1.5/8; named only w2.c1 (not R)
"""

from __future__ import annotations

import csv

import pytest

from iba.report.attribution import attribution_table, kept_turns, names
from iba.report.build import build_report
from iba.report.data import load_report_data
from iba.types import TraceStep
from tests.report.fixed_store import NOW, agent_trace, build

DASH = "\u2013"


def read_csv(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("attr")
    ds, store, _ = build(tmp)
    build_report(store, [ds], tmp / "out")
    return tmp, ds, store, tmp / "out"


def cell(count, n=8):
    return f"{count:g} ({100 * count / n:.1f}%)"


def test_two_by_two_and_funnel_exact(report):
    *_, out = report
    rows = {r["Agent (model)"]: r for r in read_csv(out / "attribution.csv")}
    want = {
        "rag (m)": [2, 1, 2.75, 2.25, 3 / 8, None, None, 4.75 / 8],
        "iba (m)": [5.75, 0.25, 2, 0, 6 / 8, 4 / 8, 4 / 8, 7.75 / 8],
        "iba?retrieval=false (m)": [0.5, 2.5, 1, 4, 3 / 8, 0.0, 0.0, 1.5 / 8],
    }
    for label, (ra, rn, nra, nrn, ret, named, named_applied, applied) in want.items():
        r = rows[label]
        assert (r["targets"], r["attributable"]) == ("8", "8"), label
        assert [r["retrieved & applied"], r["retrieved, not applied"], r["not retrieved, applied"],
                r["not retrieved, not applied"]] == [cell(ra), cell(rn), cell(nra), cell(nrn)], label
        assert r["retrieved"] == f"{100 * ret:.1f}" and r["applied"] == f"{100 * applied:.1f}", label
        # the fixed store's traces record no prompts: reach is not known, and the funnel skips that stage
        shown = [r["\u2192 reached"], r["\u2192 named"], r["\u2192 applied"], r["reached"]]
        assert shown == ([DASH] * 4 if named is None else [DASH, f"{100 * named:.1f}", f"{100 * named_applied:.1f}", DASH]), label
    # the applied column is the per-target pass rate, the same rule as Figure 5(c) (static + dynamic)
    sd = {(r["row"], r["x"]): r for r in read_csv(out / "fig5c_static_dynamic.csv")}
    rag = [(float(sd[("rag (m)", k)]["value"]), int(sd[("rag (m)", k)]["n"])) for k in ("static", "dynamic")]
    assert sum(v * n for v, n in rag) / sum(n for _, n in rag) == pytest.approx(100 * 4.75 / 8)
    md = (out / "report.md").read_text()
    assert "Attribution: retrieved \u2192 reached \u2192 named \u2192 applied" in md and "same 3 instance(s)" in md
    assert 'id="attribution"' in (out / "report.html").read_text()


def test_per_target_records_use_what_was_kept(report):
    *_, out = report
    recs = {(r["row"], r["instance_id"], r["target"]): r for r in read_csv(out / "attribution_targets.csv")}
    assert len(recs) == 24 and not any(k[1] == "d2" for k in recs)  # d2 left the comparison
    # iba's search returned u1-t12 (w1.c2's evidence), its reranker dropped it
    assert recs[("iba (m)", "w1", "c2")]["retrieved"] == "no"
    assert recs[("iba (m)", "w1", "c1")]["retrieved"] == "yes"
    assert recs[("iba (m)", "d1", "s2")]["named"] == "yes" and recs[("iba (m)", "d1", "s2")]["retrieved"] == "no"
    assert recs[("rag (m)", "w1", "c1")]["named"] == ""  # rag extracts no preferences
    assert float(recs[("iba (m)", "w2", "c3")]["applied"]) == pytest.approx(0.75)


def test_a_row_without_trace_shows_only_applied(tmp_path):
    """A direct row (no retrieval in its trace) and an iba-fc row with one failed run (no trace)."""
    from iba.run.store import Store
    from iba.types import Action, RunRecord, ScoreRecord, Verdict

    ds, path, _ = build(tmp_path)
    with Store(path) as s:
        did = next(iter(s.runs("main"))).dataset
        direct = [TraceStep(step="truncate_history", outputs={"kept_turns": 30, "dropped_turns": 0}),
                  TraceStep(step="answer", llm_calls=1)]
        plan = {  # agent -> instance -> (status, trace, passed per target)
            "direct": {"w1": ("ok", direct, [True, False]), "w2": ("ok", direct, [False, False, True]),
                       "d1": ("ok", direct, [True, True, False])},
            # w1 kept u1-t12 only and names the formal tone; d1 never ran extraction (counts as not named)
            "iba-fc": {"w1": ("ok", agent_trace(["u1-t10"], ["u1-t12"], [("tone", "formal")]), [False, True]),
                       "w2": ("failed", None, [False, False, False]),
                       "d1": ("ok", agent_trace(["u2-t05"], ["u2-t05"], None), [False, True, True])},
        }
        for agent, per in plan.items():
            for iid, (status, trace, passed) in per.items():
                gen = iid.startswith("w")
                rk = f"{agent}-{iid}"
                action = None if trace is None else (
                    Action(kind="generate", text="x", trace=trace) if gen else
                    Action(kind="call_api", api_name="order_food", params={"p1": "x"}, trace=trace))
                s.put_run(RunRecord(key=rk, run="main", dataset=did, instance_id=iid, user_id="u1" if gen else "u2",
                                    domain="writing" if gen else "daily",
                                    scenario="technical_documentation" if iid == "w1" else "diary" if gen
                                    else "food_ordering", agent=agent, model="m", status=status, action=action,
                                    error="AgentError: bad JSON" if status == "failed" else None,
                                    started_at=NOW, iba_version="0"))
                vs = [Verdict(target=f"{'c' if gen else 's'}{i + 1}", kind="checkpoint" if gen else "slot",
                              judge="J1" if gen else "slot-match", passed=p) for i, p in enumerate(passed)]
                s.put_score(ScoreRecord(run_key=rk, scorer="judge:J1" if gen else "slots", verdicts=vs,
                                        score=sum(passed) / len(passed)))
    data = load_report_data(path, [ds])
    t = attribution_table(data)
    rows = {r[0]: [t.text(v) for v in r[1:]] for r in t.rows}
    # direct: 8 targets, 4 applied (w1.c1, w2.c3, d1.s1, d1.s2); nothing else is known
    assert rows["direct (m) [reference: full context]"] == ["8"] + [DASH] * 10 + ["50.0"]
    # iba-fc: w2 failed (no trace) -> 5 attributable of 8: w1.c1 0 notR, w1.c2 1 R (named), d1.s1 0 notR,
    # d1.s2 1 notR, d1.s3 1 R (not named: no extraction)
    assert rows["iba-fc (m)"] == ["8", "5", "2 (40.0%)", "0 (0.0%)", "1 (20.0%)", "2 (40.0%)", "40.0", DASH, "20.0",
                                  "20.0", DASH, "37.5"]
    sentence = t.note.split("Not attributable")[1].split(". ")[0]
    assert "iba-fc (m): 3 of 8" in sentence and "direct" not in sentence


def test_reach_is_read_from_the_deciding_prompts(tmp_path):
    """A direct row whose answer prompts show u1-t10 whole (w1.c1's gold turn) and u2-t01 (d1.s1's), and
    a cut start of another turn: 2 of 8 targets reached, and the reached column says so."""
    from iba.run.store import Store
    from iba.types import Action, RunRecord, ScoreRecord, Verdict

    ds, path, _ = build(tmp_path)
    with Store(path) as s:
        did = next(iter(s.runs("main"))).dataset
        for iid in ("w1", "w2", "d1"):
            gen = iid.startswith("w")
            shown = {"w1": "[2025-01-02 user] turn 10 of u1\n[2025-01-02 user] turn 1\u2026", "w2": "nothing", "d1": "turn 1 of u2"}[iid]
            trace = [TraceStep(step="answer", prompt_text=f"History:\n{shown}\nNew request")]
            action = Action(kind="generate", text="x", trace=trace) if gen else Action(kind="call_api", api_name="a", params={"p1": "x"}, trace=trace)
            n = {"w1": 2, "w2": 3, "d1": 3}[iid]
            rk = f"direct-{iid}"
            s.put_run(RunRecord(key=rk, run="main", dataset=did, instance_id=iid, user_id="u1" if gen else "u2",
                                domain="writing" if gen else "daily", scenario="x", agent="direct", model="m",
                                status="ok", action=action, started_at=NOW, iba_version="0"))
            s.put_score(ScoreRecord(run_key=rk, scorer="judge:J1" if gen else "slots", score=0.0, verdicts=[
                Verdict(target=f"{'c' if gen else 's'}{i + 1}", kind="checkpoint" if gen else "slot",
                        judge="J1" if gen else "slot-match", passed=False) for i in range(n)]))
    data = load_report_data(path, [ds])
    t = attribution_table(data)
    rows = {r[0]: [t.text(v) for v in r[1:]] for r in t.rows}
    assert rows["direct (m) [reference: full context]"][-2:] == ["25.0", "0.0"]
    from iba.report.attribution import attribute

    got = {(x.instance_id, x.target): x.reached for x in attribute(data) if x.row.agent == "direct"}
    assert got == {("w1", "c1"): True, ("w1", "c2"): False, ("w2", "c1"): False, ("w2", "c2"): False,
                   ("w2", "c3"): False, ("d1", "s1"): True, ("d1", "s2"): False, ("d1", "s3"): False}


def test_kept_turns_prefer_the_reranker_and_need_a_trace():
    assert kept_turns(agent_trace(["a", "b"], ["b"], None)) == {"b"}
    assert kept_turns(agent_trace(["a", "b"], None, None)) == {"a", "b"}
    assert kept_turns([TraceStep(step="answer")]) is None and kept_turns([]) is None


@pytest.mark.parametrize("text, phrases, hit", [
    ("api: prefers tables for specifications", ["table_spec"], True),  # prefixes of >= 4 characters
    ("format: table", ["tables"], True),
    ("emoji: now uses emojis", ["no_emoji"], False),  # "no" is too short to match "now" by prefix
    ("emoji: no emoji at all", ["no_emoji"], True),
    ("cuisine: Thai", ["italian", "pasta"], False),
    ("spice: Mild please", ["hot", "mild"], True),
])
def test_names_matches_normalized_tokens(text, phrases, hit):
    assert names(text, phrases) is hit


# --------------------------------------------------------------------------- error bars


def test_plotted_intervals_are_the_ci_table(report):
    from iba.report import tables
    from iba.report.intervals import bootstrap_ci

    _, ds, store, out = report
    data = load_report_data(store, [ds])
    series, bounds = tables.score_bars(data)
    ci = {r["Agent (model)"]: r for r in read_csv(out / "ci.csv")}
    t4 = {r["Agent (model)"]: r for r in read_csv(out / "table4.csv")}
    assert set(series) == set(ci) == {"rag (m)", "iba (m)", "iba?retrieval=false (m)"}
    for label, pts in series.items():
        lo, hi = bounds[label]["Overall"]
        assert ci[label]["95% CI"] == f"[{lo:.1f}, {hi:.1f}]"
        assert ci[label]["Overall"] == f"{pts['Overall'][0]:.1f}" and ci[label]["n"] == str(pts["Overall"][1])
        for dom in ("Writing", "Daily", "Overall"):
            assert t4[label][dom] == f"{pts[dom][0]:.1f}"
            assert bounds[label][dom][0] <= pts[dom][0] <= bounds[label][dom][1]
    # a domain's interval is the bootstrap over that domain's compared instances, in compared order
    rag_w = [i.score() for i in data.compared if i.row.label == "rag (m)" and i.domain == "writing"]
    want = bootstrap_ci(rag_w)
    assert bounds["rag (m)"]["Writing"] == pytest.approx((100 * want.lo, 100 * want.hi))
    assert sorted(rag_w) == pytest.approx([5 / 12, 7 / 8])
    # fig4_domains.csv holds exactly what was drawn
    drawn = {(r["row"], r["x"]): r for r in read_csv(out / "fig4_domains.csv")}
    for label, pts in bounds.items():
        for x, (lo, hi) in pts.items():
            assert (float(drawn[(label, x)]["lo"]), float(drawn[(label, x)]["hi"])) == pytest.approx((lo, hi))


def test_bar_plot_draws_the_given_intervals(monkeypatch):
    from matplotlib.axes import Axes

    from iba.report import plots

    drawn = []
    real = Axes.errorbar

    def record(self, x, y, yerr=None, **kw):
        drawn.append((round(y[0], 6), round(y[0] - yerr[0][0], 6), round(y[0] + yerr[1][0], 6)))
        return real(self, x, y, yerr=yerr, **kw)

    monkeypatch.setattr(Axes, "errorbar", record)
    series = {"a": {"Writing": (50.0, 2), "Overall": (40.0, 3)}, "b": {"Writing": (None, 0), "Overall": (70.0, 3)}}
    bounds = {"a": {"Writing": (25.0, 75.0), "Overall": (20.0, 60.0)}, "b": {"Overall": (65.0, 80.0)}}
    assert plots.bar_plot(series, "t", intervals=bounds)[:4] == b"\x89PNG"
    assert sorted(drawn) == [(40.0, 20.0, 60.0), (50.0, 25.0, 75.0), (70.0, 65.0, 80.0)]


# --------------------------------------------------------------------------- real agent traces


async def test_reads_the_traces_the_agents_write(tmp_path):
    """The shapes read here are the ones the IBA-Agent tools (agents/toolkit.py) and agents/rag.py record (scripted LLM)."""
    from iba.agents.iba_agent import IBAAgent
    from iba.agents.rag import RagAgent
    from iba.report.attribution import preference_text
    from tests.agents.helpers import TEXT_TASK, env, iba_backend, small_history
    from tests.fakes import ScriptedBackend

    hist = small_history()
    action = await IBAAgent(env(iba_backend(), tmp_path), size="64", overlap="10").act(TEXT_TASK, hist)
    by = {s.step: s for s in action.trace}
    retained = {t for p in by["rerank_salience"].outputs["retained"] for t in p["turn_ids"]}
    searched = {t for p in by["similarity_retrieve"].outputs for t in p["turn_ids"]}
    assert kept_turns(action.trace) == retained and retained <= {t.id for t in hist} and searched
    prefs = preference_text(action.trace)
    # the resolved (latest) value, not the superseded one
    assert names(prefs, ["complete_runnable_code"]) and not names(prefs, ["fragments"])

    rag = await RagAgent(env(ScriptedBackend(lambda m, k: "ok"), tmp_path), size="64", overlap="10").act(TEXT_TASK, hist)
    hits = next(s for s in rag.trace if s.step == "similarity_retrieve").outputs
    assert kept_turns(rag.trace) == {t for h in hits for t in h["turn_ids"]} and preference_text(rag.trace) is None
    # the deciding prompts reach measures: iba's extract, align and synthesize, rag's answer
    from iba.eval.reach import deciding_prompts

    assert [p.step for p in deciding_prompts(action.trace)] == ["extract_preferences", "align_plan", "synthesize"]
    assert [p.step for p in deciding_prompts(rag.trace)] == ["answer"]
    correction = "Actually, rewrite it with full code examples I can run, the fragments never work!"
    assert correction in deciding_prompts(action.trace)[-1].text  # the evidence beside the plan


def test_a_failed_run_is_attributed_from_its_partial_trace(tmp_path):
    """A run that retrieved, then raised: its targets are attributable from RunRecord.partial_trace
    (and applied 0), where before the runner kept no steps and they were left out."""
    from iba.run.store import Store
    from iba.types import RunRecord, ScoreRecord, Verdict

    ds, path, _ = build(tmp_path)
    with Store(path) as s:
        did = next(iter(s.runs("main"))).dataset
        for iid, partial in (("w1", agent_trace(["u1-t10"], ["u1-t10"], None)), ("w2", [])):
            rk = f"iba-fc-{iid}"
            s.put_run(RunRecord(key=rk, run="main", dataset=did, instance_id=iid, user_id="u1", domain="writing",
                                scenario="technical_documentation" if iid == "w1" else "diary", agent="iba-fc",
                                model="m", status="failed", error="AgentError: bad JSON", partial_trace=partial,
                                started_at=NOW, iba_version="0"))
            n = 2 if iid == "w1" else 3
            s.put_score(ScoreRecord(run_key=rk, scorer="judge:J1", score=0.0, verdicts=[
                Verdict(target=f"c{i + 1}", kind="checkpoint", judge="J1", passed=False) for i in range(n)]))
    t = attribution_table(load_report_data(path, [ds]))
    row = next(r for r in t.rows if r[0].startswith("iba-fc"))
    # w1's two checkpoints come from its partial trace; w2 raised before retrieving: not attributable
    assert [t.text(v) for v in row[1:3]] == ["5", "2"]


def test_ci_table_note_gives_the_chance_floor_of_the_callapi_instances(report):
    from iba.report import tables

    _, ds, store, _ = report
    data = load_report_data(store, [ds])
    note = tables.ci_table(data).note
    # d2 errored for rag, so d1 is the one CallAPI instance compared: slots with 2, 3 and 2 allowed
    # values, one accepted each -> (1/2 + 1/3 + 1/2) / 3
    assert "would score 44.4 on the 1 CallAPI instance(s) compared" in note
