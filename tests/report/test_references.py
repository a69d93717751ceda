"""Reference rows in the report: marked, set apart (null first, direct and oracle last), never ranked,
and the references table's numbers, computed by hand; the sample a store records, in the header.

Slot verdicts written below (d1 has 3 slots, d2 has 2):
  null   d1 1/3, d2 0    -> 16.7      rag    d1 2/3, d2 1/2 -> 58.3
  direct d1 1/3, d2 1/2  -> 41.7      oracle d1 1,   d2 1   -> 100
rag: gain over null 41.7, gap to the oracle 41.7, gap closed (58.3 - 16.7) / (100 - 16.7) = 50%.
"""

from __future__ import annotations

import csv
import io
import re

import pytest

from iba.dataset import Dataset, dataset_id, write_dataset
from iba.report.build import build_report
from iba.run.sample import make_sample
from iba.run.store import Store
from iba.types import Action, Manifest, Persona, RunRecord, ScoreRecord, TraceStep, Usage, Verdict
from tests.report.fixed_store import KEYS, NOW, TASKS, _turns

T, F = True, False
SLOTS = {"rag": {"d1": [T, F, T], "d2": [T, F]}, "null": {"d1": [F, F, T], "d2": [F, F]},
         "direct": {"d1": [T, F, F], "d2": [F, T]}, "oracle": {"d1": [T, T, T], "d2": [T, T]}}
NULL, RAG, DIRECT, ORACLE = "null (m) [reference: no history]", "rag (m)", "direct (m) [reference: full context]", \
    "oracle (m) [reference: gold evidence]"


def write_store(tmp, agents=("oracle", "rag", "direct", "null")):
    """The fixed dataset and a store of call_api runs (in the given order, oracle first on purpose)."""
    ds_dir = tmp / "ds"
    histories = {"u1": _turns("u1", 30), "u2": _turns("u2", 20)}
    personas = [Persona(id=u, name=u, background={}, traits=[], role="tester") for u in histories]
    write_dataset(ds_dir, Manifest(name="fixed", generator="test", seed=1, taxonomy_version="t", created_by="test",
                                   counts={"instances": 4}), personas, histories, TASKS, KEYS)
    did = dataset_id(Dataset(ds_dir))
    keys = {k.instance_id: k for k in KEYS}
    tasks = {t.instance_id: t for t in TASKS}
    store_path = tmp / "refs.sqlite"
    with Store(store_path) as store:
        for agent in agents:
            for iid, passed in SLOTS[agent].items():
                t, rk = tasks[iid], f"{agent}-{iid}"
                trace = [TraceStep(step="truncate_history", inputs={"turns": 20}, outputs={"kept_turns": 5})]
                store.put_run(RunRecord(
                    key=rk, run="main", dataset=did, instance_id=iid, user_id=t.user_id, domain=t.domain,
                    scenario=t.scenario, agent=agent, model="m", status="ok",
                    action=Action(kind="call_api", api_name="order_food", params={}, trace=trace),
                    usage=Usage(llm_calls=1, prompt_tokens=10, completion_tokens=2), latency_s=1.0, started_at=NOW,
                    iba_version="0.1.0"))
                vs = [Verdict(target=s.id, kind="slot", judge="slot-match", passed=p) for s, p in zip(keys[iid].slots, passed)]
                store.put_score(ScoreRecord(run_key=rk, scorer="slots", verdicts=vs, score=sum(passed) / len(passed)))
    return ds_dir, store_path, did


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("refs")
    ds_dir, store, _ = write_store(tmp)
    build_report(store, [ds_dir], tmp / "out")
    return tmp / "out"


def test_table4_marks_the_references_and_sets_them_apart(report):
    md = (report / "table4.md").read_text()
    rows = [line.split(" | ")[0].lstrip("| ") for line in md.splitlines() if line.startswith("| ") and "(m)" in line]
    assert rows == [NULL, RAG, DIRECT, ORACLE]  # stored oracle first: sorted floor -> system -> ceilings
    assert f"| {NULL} | 16.7 | 16.7 |" in md and f"| {ORACLE} | 100.0 | 100.0 |" in md
    assert "are not systems" in md
    # every other per-row table carries the same labels in the same order
    for name in ("ci", "cost"):
        text = (report / f"{name}.md").read_text()
        assert [text.index(label) for label in (NULL, RAG, DIRECT, ORACLE)] == sorted(
            text.index(label) for label in (NULL, RAG, DIRECT, ORACLE)), name


def test_cells_csv_names_the_reference(report):
    cells = list(csv.DictReader(io.StringIO((report / "cells.csv").read_text())))
    assert {(c["agent"], c["reference"]) for c in cells} == {("null", "null"), ("rag", ""), ("direct", "direct"),
                                                             ("oracle", "oracle")}


def test_references_table_by_hand(report):
    rows = {r["Agent (model)"]: r for r in csv.DictReader(io.StringIO((report / "references.csv").read_text()))}
    assert list(rows) == [RAG]  # one line per system, none for the references themselves
    r = rows[RAG]
    assert (r["n"], r["null"], r["system"], r["full context"], r["oracle"]) == ("2", "16.7", "58.3", "41.7", "100")
    assert (r["gain over null"], r["gap to oracle"], r["gap closed %"]) == ("41.7", "41.7", "50")
    lo, hi = map(float, re.findall(r"-?\d+\.\d", r["gap 95% CI"]))
    assert lo <= 41.7 <= hi
    md = (report / "references.md").read_text()
    assert "25.0% of each history's turns" in md  # direct's traces: 5 of 20 turns kept


def test_html_never_ranks_a_reference_and_styles_it_apart(report):
    page = (report / "report.html").read_text()
    table4 = page[page.index('id="table4"'):]
    table4 = table4[:table4.index("</table>")]
    rows = table4.split("<tr")[1:]
    oracle = next(r for r in rows if "oracle (m)" in r)
    rag = next(r for r in rows if ">rag (m)</th>" in r)
    assert 'class="reference"' in oracle and "best" not in oracle  # 100 is no win
    assert 'class="reference"' not in rag and 'class="num best overall"' in rag
    assert "Reference rows are the direct prompt" in page  # the header names them


def test_a_store_sample_is_in_the_header_and_table4(tmp_path):
    ds_dir, store_path, did = write_store(tmp_path, agents=("rag",))
    ds = Dataset(ds_dir)
    daily = [t for t in ds.instances if t.domain == "daily"]
    sample = make_sample(daily, 2, 5, dataset=did, dataset_instances=4, filters={"domain": ["daily"]})
    with Store(store_path) as store:
        store.put_sample(sample)
    build_report(store_path, [ds_dir], tmp_path / "out")
    md = (tmp_path / "out" / "report.md").read_text()
    head = md.split("###")[0]
    assert "a stratified sample of 2 of 2 instances (domain daily), seed 5" in head
    assert "--sample 2 --sample-seed 5 --domain daily" in head and "not the whole benchmark of 4" in head
    assert "a stratified sample of 2" in (tmp_path / "out" / "table4.md").read_text()
    assert "a stratified sample of 2" in (tmp_path / "out" / "report.html").read_text()
