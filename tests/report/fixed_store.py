"""A hand-made dataset and result store with known numbers (see the expected values in
test_report.py, computed by hand from the verdicts written here)."""

from __future__ import annotations

from pathlib import Path

from iba.dataset import Dataset, write_dataset
from iba.types import (Action, AnswerKey, Checkpoint, EvidenceLabel, Manifest, Persona, QAProbe, RunRecord,
                       ScoreRecord, Slot, TaskView, TraceStep, Turn, Usage, Verdict, VerifierRef)

T, F, N = True, False, None
NOW = "2025-03-01T12:00:00"


def _turns(user: str, n: int) -> list[Turn]:
    return [Turn(id=f"{user}-t{i:02d}", session_id=f"{user}-s{i // 10}", timestamp=f"2025-01-{1 + i // 10:02d}T10:{i:02d}:00",
                 role="user" if i % 2 == 0 else "assistant", text=f"turn {i} of {user}") for i in range(n)]


def _ev(user: str, idx: list[int], superseded: list[int] = ()) -> list[EvidenceLabel]:
    return [EvidenceLabel(turn_id=f"{user}-t{i:02d}", signal_type="direct_statement", dimension="d", value="v",
                          timestamp=NOW, superseded=i in superseded) for i in idx + list(superseded)]


def _cp(i: int, kind: str = "static", verifier: VerifierRef | None = None, value: str = "v",
        evidence: list[str] = ()) -> Checkpoint:
    return Checkpoint(id=f"c{i}", dimension=f"d{i}", dimension_name=f"Dimension {i}", value=value,
                      expected=f"Requirement {i} holds.", kind=kind, evidence=list(evidence), verifier=verifier)


def _slot(i: int, kind: str = "static", value: str = "v", evidence: list[str] = ()) -> Slot:
    return Slot(id=f"s{i}", param=f"p{i}", dimension=f"d{i}", value=value, accepted=[value], kind=kind,
                evidence=list(evidence))


# each checkpoint/slot names its gold value and evidence turns (the attribution test reads them)
KEYS = [
    AnswerKey(instance_id="w1", checkpoints=[_cp(1, verifier=VerifierRef(id="has_table"), value="tables",
                                                 evidence=["u1-t10"]),
                                             _cp(2, "dynamic", value="formal_tone", evidence=["u1-t12"])],
              evidence=_ev("u1", [10, 12], superseded=[4]),
              qa=[QAProbe(id="q1", target="c1", question="How?", options=["table", "prose"], answer=0)]),
    AnswerKey(instance_id="w2", checkpoints=[_cp(1, value="short_entries", evidence=["u1-t20"]),
                                             _cp(2, value="first_person", evidence=["u1-t20"]),
                                             _cp(3, "dynamic", value="evening_reflection", evidence=["u1-t20"])],
              evidence=_ev("u1", [20]),
              qa=[QAProbe(id="q2", target="c1", question="Which?", options=["x", "y"], answer=0)]),
    AnswerKey(instance_id="d1", slots=[_slot(1, value="italian", evidence=["u2-t01"]),
                                       _slot(2, "dynamic", value="mild", evidence=["u2-t03"]),
                                       _slot(3, value="soft", evidence=["u2-t05"])],
              evidence=_ev("u2", [1, 3, 5])),
    AnswerKey(instance_id="d2", slots=[_slot(1, evidence=["u2-t07"]), _slot(2, evidence=["u2-t09"])],
              evidence=_ev("u2", [7, 9, 11, 13, 15, 17])),
]
TASKS = [
    TaskView(instance_id="w1", user_id="u1", domain="writing", scenario="technical_documentation",
             scenario_name="Technical documentation writing", query="Document the <export> API.", action="generate", now=NOW),
    TaskView(instance_id="w2", user_id="u1", domain="writing", scenario="diary", scenario_name="Diary writing",
             query="Write today's diary entry.", action="generate", now=NOW),
    TaskView(instance_id="d1", user_id="u2", domain="daily", scenario="food_ordering", scenario_name="Food ordering",
             query="Order dinner.", action="call_api", now=NOW, api_name="order_food",
             api_schema={"type": "object", "properties": {"p1": {"type": "string", "enum": ["italian", "japanese"]},
                                                          "p2": {"type": "string", "enum": ["mild", "hot", "none"]},
                                                          "p3": {"type": "string", "enum": ["soft", "regular"]}}}),
    TaskView(instance_id="d2", user_id="u2", domain="daily", scenario="food_ordering", scenario_name="Food ordering",
             query="Order lunch.", action="call_api", now=NOW),
]

# agent -> instance -> verdicts. Generate: {(judge, repeat): [passed per checkpoint]};
# call_api: [passed per slot], "error" for an errored run, ("invalid", [...]) for an invalid action.
VERDICTS = {
    "rag": {
        "w1": {("J1", 0): [T, F], ("J1", 1): [T, T], ("J2", 0): [T, N]},
        "w2": {("J1", 0): [T, T, F], ("J1", 1): [T, F, F], ("J2", 0): [F, F, T]},
        "d1": [T, F, T],
        "d2": "error",
    },
    "iba": {
        "w1": {("J1", 0): [T, T], ("J1", 1): [T, T], ("J2", 0): [T, T]},
        "w2": {("J1", 0): [T, T, T], ("J1", 1): [T, T, F], ("J2", 0): [T, T, T]},
        "d1": [T, T, T],
        "d2": [T, F],
    },
    "iba?retrieval=false": {
        "w1": {("J1", 0): [F, T], ("J1", 1): [F, T], ("J2", 0): [F, F]},
        "w2": {("J1", 0): [T, F, F], ("J1", 1): [T, F, F], ("J2", 0): [T, F, F]},
        "d1": ("invalid", [F, F, F]),
        "d2": [T, T],
    },
}
# agent -> instance -> (turn ids its searches returned, turn ids the reranker kept or None when the
# agent has no rerank step, preference lines extracted or None when it has no extraction step)
TRACES = {
    "rag": {"w1": (["u1-t09", "u1-t10"], None, None), "w2": (["u1-t05"], None, None),
            "d1": (["u2-t01", "u2-t02", "u2-t03"], None, None), "d2": ([], None, None)},
    # iba's search found u1-t12 but the reranker dropped it: c2 of w1 is not counted as retrieved
    "iba": {"w1": (["u1-t10", "u1-t12"], ["u1-t10"], [("format", "uses tables for specs")]),
            "w2": (["u1-t20", "u1-t02"], ["u1-t20"], [("length", "short entries"), ("voice", "written in first person")]),
            "d1": (["u2-t01", "u2-t03", "u2-t05"], ["u2-t01", "u2-t05"], [("cuisine", "Italian"), ("spice", "mild")]),
            "d2": (["u2-t07"], ["u2-t07"], [])},
    "iba?retrieval=false": {"w1": (["u1-t12"], None, []), "w2": (["u1-t03"], None, [("length", "short entries")]),
                            "d1": (["u2-t03", "u2-t05"], None, []), "d2": ([], None, [])},
}
QA_ANSWERS = {"rag": {"q1": ("w1", "Answer: A", 1.0), "q2": ("w2", "B", 0.0)}}
RESPONSE = "| a | b |\n|---|---|\n| 1 | 2 |\n<script>alert('x')</script>"


def agent_trace(found: list[str], kept: list[str] | None, prefs: list[tuple[str, str]] | None) -> list[TraceStep]:
    """The steps an agent records (agents/rag.py, the IBA-Agent tools of agents/toolkit.py), with the same output shapes."""
    steps = [TraceStep(step="similarity_retrieve", inputs={"k": 3},
                       outputs=[{"chunk_id": f"ch{i}", "turn_ids": [t], "score": 0.5} for i, t in enumerate(found)])]
    if kept is not None:
        steps.append(TraceStep(step="rerank_salience", outputs={
            "fallback": None, "scores": {}, "unscored": [],
            "retained": [{"chunk_id": f"k{i}", "turn_ids": [t], "score": 0.5, "facets": []} for i, t in enumerate(kept)]}))
    if prefs is not None:
        current = [{"aspect": a, "value": v, "kind": "asked_for", "date": ""} for a, v in prefs]
        steps.append(TraceStep(step="extract_preferences", prompt="agent_extract", llm_calls=1, outputs={
            "extracted": {"preferences": current}, "resolved": {"current": current, "superseded": []}}))
    steps.append(TraceStep(step="synthesize", prompt="rag_answer", prompt_hash="abcdef0123456789",
                           llm_calls=2, prompt_tokens=100, completion_tokens=20, latency_s=1.5))
    return steps


def build(tmp: Path) -> tuple[Path, Path, str]:
    """Write the dataset and the store; returns (dataset dir, store path, dataset id)."""
    from iba.dataset import dataset_id
    from iba.run.store import Store

    ds_dir = tmp / "ds"
    histories = {"u1": _turns("u1", 30), "u2": _turns("u2", 20)}
    personas = [Persona(id=u, name=u, background={}, traits=[], role="tester") for u in histories]
    manifest = Manifest(name="fixed", generator="test", seed=1, taxonomy_version="t", created_by="test",
                        counts={"instances": 4})
    write_dataset(ds_dir, manifest, personas, histories, TASKS, KEYS)
    did = dataset_id(Dataset(ds_dir))
    store_path = tmp / "runs.sqlite"
    keys = {k.instance_id: k for k in KEYS}
    tasks = {t.instance_id: t for t in TASKS}
    with Store(store_path) as store:
        for agent, per_inst in VERDICTS.items():
            for iid, spec in per_inst.items():
                t, k = tasks[iid], keys[iid]
                rk = f"{agent}-{iid}"
                errored = spec == "error"
                trace = agent_trace(*TRACES[agent][iid])
                if t.action == "generate":
                    action = Action(kind="generate", text=RESPONSE, trace=trace)
                else:
                    action = Action(kind="call_api", api_name="order_food", params={"p1": "x"}, trace=trace)
                store.put_run(RunRecord(
                    key=rk, run="main", dataset=did, instance_id=iid, user_id=t.user_id, domain=t.domain,
                    scenario=t.scenario, agent=agent, model="m", status="errored" if errored else "ok",
                    action=None if errored else action, error="TimeoutError: slow" if errored else None,
                    usage=Usage(llm_calls=2, prompt_tokens=100, completion_tokens=20, reused_prompt_tokens=30), latency_s=1.5,
                    started_at=NOW, iba_version="0.1.0"))
                if t.action == "generate":
                    for (judge, rep), passed in spec.items():
                        vs = [Verdict(target=c.id, kind="checkpoint", judge=judge, repeat=rep, passed=p, rationale=f"{judge} says {p}")
                              for c, p in zip(k.checkpoints, passed)]
                        scored = [p for p in passed if p is not None]
                        store.put_score(ScoreRecord(run_key=rk, scorer=f"judge:{judge}", repeat=rep, verdicts=vs,
                                                    score=sum(scored) / len(scored) if scored else None,
                                                    usage=Usage(llm_calls=len(passed), prompt_tokens=50, completion_tokens=10)))
                    if iid == "w1":
                        store.put_score(ScoreRecord(run_key=rk, scorer="verifiers", verdicts=[
                            Verdict(target="c1", kind="checkpoint", judge="verifier:has_table", passed=True,
                                    rationale="1 tables")], score=1.0))
                else:
                    invalid = isinstance(spec, tuple)
                    passed = spec[1] if invalid else ([N] * len(k.slots) if errored else spec)
                    vs = [Verdict(target=s.id, kind="slot", judge="slot-match", passed=p, rationale="r")
                          for s, p in zip(k.slots, passed)]
                    scored = [p for p in passed if p is not None]
                    store.put_score(ScoreRecord(run_key=rk, scorer="slots", verdicts=vs, invalid_action=invalid,
                                                score=sum(scored) / len(scored) if scored else None))
        for agent, probes in QA_ANSWERS.items():
            for probe, (iid, text, score) in probes.items():
                t = tasks[iid]
                rk = f"{agent}-{iid}-{probe}"
                store.put_run(RunRecord(
                    key=rk, run="main", dataset=did, instance_id=iid, probe=probe, user_id=t.user_id,
                    domain=t.domain, scenario=t.scenario, agent=agent, model="m", status="ok",
                    action=Action(kind="generate", text=text), usage=Usage(llm_calls=1, prompt_tokens=10, completion_tokens=1),
                    latency_s=0.5, started_at=NOW, iba_version="0.1.0"))
                store.put_score(ScoreRecord(run_key=rk, scorer="qa", score=score, verdicts=[
                    Verdict(target=probe, kind="qa", judge="qa-parse", passed=bool(score))]))
    return ds_dir, store_path, did
