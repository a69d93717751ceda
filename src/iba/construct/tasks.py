"""Instances: the public TaskView and the hidden AnswerKey of each planned instance.

The query is a scenario request template filled with a topic (newly worded: it never contains a
cue or an expected value). Generate(text) scenarios get one Checkpoint per constraint; CallAPI
scenarios one Slot per slot parameter of each constrained dimension, accepted values taken from
the expected value's `api` mapping (for a changed preference: the new value's).
"""

from __future__ import annotations

from iba.construct.fixed_params import extract_fixed_params
from iba.construct.plan_types import Constraint, DistractorItem, InstancePlan
from iba.construct.qa import qa_probe
from iba.construct.rng import derive, iso
from iba.types import AnswerKey, Checkpoint, DistractorLabel, EvidenceLabel, Slot, TaskView

Spans = dict[str, dict[str, tuple[int, int, str]]]  # item key -> name -> (start, end, clause)


def _span(spans: Spans, key: str, name: str) -> dict:
    hit = spans.get(key, {}).get(name)
    return {} if hit is None else {"span": (hit[0], hit[1]), "clause": hit[2]}

STATE_SIGNAL = "direct_statement"  # a state mention states the situation; the constraint is implied


def task_view(inst: InstancePlan) -> TaskView:
    s = inst.scenario
    return TaskView(
        instance_id=inst.instance_id,
        user_id=inst.persona_id,
        domain=inst.domain,
        scenario=s.id,
        scenario_name=s.name,
        query=inst.query,
        action=s.action,
        api_name=s.api.name if s.api else None,
        api_schema=s.api.json_schema() if s.api else None,
        now=iso(inst.now),  # type: ignore[arg-type]
    )


def _labels(inst: InstancePlan, spans: Spans) -> list[EvidenceLabel]:
    labels = []
    for item in inst.evidence:
        for r in item.reveals:
            labels.append(
                EvidenceLabel(
                    turn_id=item.turn_id,
                    signal_type=item.signal_type,  # type: ignore[arg-type]
                    dimension=r.dimension,
                    value=r.value,
                    timestamp=item.timestamp,
                    superseded=r.superseded,
                    **_span(spans, item.key, r.dimension),
                )
            )
    for m in inst.states:
        for c in inst.constraints:
            if c.source == "state" and c.state is m.state:
                labels.append(
                    EvidenceLabel(
                        turn_id=m.turn_id, signal_type=STATE_SIGNAL, dimension=c.dimension.id, value=c.expected.id, timestamp=m.timestamp,
                        **_span(spans, m.key, "state"),
                    )
                )
    labels.sort(key=lambda e: (e.timestamp, e.turn_id, e.dimension))
    return labels


def _evidence_of(c: Constraint, labels: list[EvidenceLabel]) -> list[str]:
    ids = [e.turn_id for e in labels if e.dimension == c.dimension.id and not e.superseded]
    return list(dict.fromkeys(ids))


def _expected_text(c: Constraint) -> str:
    if c.source == "state" and c.state is not None:
        return f"{c.expected.text} (the user's current situation: {c.state.description})"
    return c.expected.text


def answer_key(inst: InstancePlan, seed: int, spans: Spans | None = None) -> AnswerKey:
    """The hidden key of an instance; `spans` (from the writer, once the text exists) locate each
    evidence clause in its turn. Without them the labels carry no span."""
    s = inst.scenario
    labels = _labels(inst, spans or {})
    rng = derive(seed, inst.instance_id, "qa")
    checkpoints: list[Checkpoint] = []
    slots: list[Slot] = []
    qa = []
    for c in inst.constraints:
        evidence = _evidence_of(c, labels)
        c.evidence = evidence
        superseded = c.superseded.text if c.superseded is not None else None
        if s.action == "generate":
            cid = f"{inst.instance_id}-c{len(checkpoints)}"
            checkpoints.append(
                Checkpoint(
                    id=cid,
                    dimension=c.dimension.id,
                    dimension_name=c.dimension.name,
                    value=c.expected.id,
                    expected=_expected_text(c),
                    kind=c.kind,
                    superseded=superseded,
                    source=c.source,
                    evidence=evidence,
                    verifier=c.expected.verifier,
                )
            )
            qa.append(qa_probe(rng, f"{cid}-qa", cid, c, s.name))
            continue
        for p in s.api.params:  # type: ignore[union-attr]
            if not (p.slot and p.dimension == c.dimension.id):
                continue
            sid = f"{inst.instance_id}-s{len(slots)}"
            slots.append(
                Slot(
                    id=sid,
                    param=p.name,
                    dimension=c.dimension.id,
                    value=c.expected.id,
                    accepted=list(c.expected.api.get(p.name, [])),
                    kind=c.kind,
                    source=c.source,
                    evidence=evidence,
                )
            )
            qa.append(qa_probe(rng, f"{sid}-qa", sid, c, s.name))
    fixed = extract_fixed_params(inst.template, s.api) if s.api else {}
    return AnswerKey(instance_id=inst.instance_id, checkpoints=checkpoints, slots=slots, evidence=labels, qa=qa, fixed_params=fixed)


def distractor_label(user_id: str, item: DistractorItem, spans: Spans | None = None) -> list[DistractorLabel]:
    """One label per preference the distractor turn voices."""
    return [
        DistractorLabel(
            user_id=user_id, turn_id=item.turn_id, form=item.form, scenario=item.scenario.id, dimension=r.dimension,  # type: ignore[arg-type]
            value=r.value, signal_type=item.signal_type, **_span(spans or {}, item.key, r.dimension),  # type: ignore[arg-type]
        )
        for r in item.reveals
    ]
