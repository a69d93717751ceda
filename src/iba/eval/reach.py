"""Reach: did a checkpoint's or slot's gold evidence clause reach, whole, the prompt of the step that
decides it? Deterministic, model-free, read from an action's trace (`TraceStep.prompt_text`).

On a capable model the score follows this closely (issue 26): shown the whole gold turns of a slot
it was right 100% of the time, shown them cut at 240 characters 78.5%, with no history 1.3%.

- The gold clause of a target: for each of its evidence turns (`Checkpoint.evidence`,
  `Slot.evidence`), the answer key's `EvidenceLabel.clause` for that turn (the label of the target's
  dimension first), else the whole turn's text. Turns whose labels are all `superseded` (evidence of
  a value the user has since changed) do not decide the target and are left out.
- The deciding steps: `extract_preferences`, `align_plan`, `align_slot` (only for the slot whose
  parameter it decides), `synthesize` (iba, iba-fc); `answer` (rag, direct); `controller` (iba-fc,
  whose final call's arguments are CallAPI params).
- Reached: some gold clause of the target appears verbatim, spacing normalised, in some deciding
  prompt. None when the trace recorded no deciding prompt, or the target has no gold clause.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from iba.types import AnswerKey, EvidenceLabel, TraceStep, Turn

DECIDING_STEPS = ("extract_preferences", "align_plan", "align_slot", "synthesize", "answer", "controller")


def normalise(text: str) -> str:
    return " ".join(text.split())


def gold_clauses(key: AnswerKey, turns: Mapping[str, Turn]) -> dict[str, list[str]]:
    """Target id -> its gold clauses (normalised, each once); an empty list when none is located."""
    labels: dict[str, list[EvidenceLabel]] = {}
    for label in key.evidence:
        labels.setdefault(label.turn_id, []).append(label)
    targets = [(c.id, c.dimension, c.evidence) for c in key.checkpoints] + [(s.id, s.dimension, s.evidence) for s in key.slots]
    out: dict[str, list[str]] = {}
    for tid, dimension, evidence in targets:
        clauses: list[str] = []
        for turn_id in evidence:
            have = labels.get(turn_id, [])
            mine = [lb for lb in have if lb.dimension == dimension] or have
            if mine and all(lb.superseded for lb in mine):
                continue
            clause = next((lb.clause for lb in mine if lb.clause and not lb.superseded), None)
            if clause is None and turn_id in turns:
                clause = turns[turn_id].text
            text = normalise(clause or "")
            if text and text not in clauses:
                clauses.append(text)
        out[tid] = clauses
    return out


@dataclass(frozen=True)
class DecidingPrompt:
    step: str
    param: str | None  # align_slot: the parameter it decides
    text: str  # normalised


def deciding_prompts(steps: Iterable[TraceStep]) -> list[DecidingPrompt]:
    """The prompts of the trace's deciding steps (those that recorded their prompt text)."""
    out = []
    for s in steps:
        if s.step in DECIDING_STEPS and s.prompt_text:
            param = s.inputs.get("param") if s.step == "align_slot" else None
            out.append(DecidingPrompt(s.step, str(param) if param is not None else None, normalise(s.prompt_text)))
    return out


def reached(clauses: Sequence[str], prompts: Sequence[DecidingPrompt], param: str | None = None) -> bool | None:
    """Whether a gold clause appears whole in a deciding prompt of this target (`param`: a slot's
    parameter; align_slot prompts count only for their own). None: nothing to measure."""
    texts = [p.text for p in prompts if p.step != "align_slot" or (param is not None and p.param == param)]
    if not clauses or not prompts:
        return None
    return any(c in t for c in clauses for t in texts)


def target_params(key: AnswerKey) -> dict[str, str | None]:
    """Target id -> the API parameter it is scored on (slots), None for checkpoints."""
    return {c.id: None for c in key.checkpoints} | {s.id: s.param for s in key.slots}


def reach_of(key: AnswerKey, turns: Mapping[str, Turn], prompts: Sequence[DecidingPrompt]) -> dict[str, bool | None]:
    """Target id -> reached (see `reached`)."""
    clauses, params = gold_clauses(key, turns), target_params(key)
    return {tid: reached(cl, prompts, params[tid]) for tid, cl in clauses.items()}
