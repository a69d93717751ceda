"""The data contracts of IBA, by boundary: common (Strict, literal types, stable_hash), taxonomy,
dataset (what its files hold: TaskView and Turn are what an agent sees, AnswerKey is evaluator-only),
agent (what an agent returns: Action, TraceStep, Usage), records (what the store keeps). Import a
contract from its module; this package re-exports every name, so `from iba.types import X` holds.

Everything that crosses a module boundary or touches disk is one of these models, with
`extra="forbid"`, so a misspelt field is an error rather than silently dropped.
"""

from iba.types.common import SIGNAL_TYPES, ActionType, ParamType, Role, SignalType, Strict, stable_hash
from iba.types.common import LEGACY_QA, item_id, split_item_id
from iba.types.taxonomy import (
    ApiParam, ApiTemplate, Dimension, Domain, PreferenceValue, Scenario, StateConstraint, Taxonomy,
    TransientState, VerifierRef,
)
from iba.types.dataset import (
    AnswerKey, Checkpoint, DistractorForm, DistractorLabel, EvidenceLabel, Manifest, Persona,
    PersonaStateSpan, PersonaStates, QAProbe, Slot, TaskView, Turn,
)
from iba.types.agent import Action, TraceStep, Usage
from iba.types.records import IngestRecord, RunRecord, ScoreRecord, Verdict

__all__ = [
    "LEGACY_QA", "SIGNAL_TYPES", "ActionType", "ParamType", "Role", "SignalType", "Strict", "item_id",
    "split_item_id", "stable_hash",
    "ApiParam", "ApiTemplate", "Dimension", "Domain", "PreferenceValue", "Scenario", "StateConstraint",
    "Taxonomy", "TransientState", "VerifierRef", "AnswerKey", "Checkpoint", "DistractorForm",
    "DistractorLabel", "EvidenceLabel", "Manifest", "Persona", "PersonaStateSpan", "PersonaStates",
    "QAProbe", "Slot", "TaskView", "Turn", "Action", "TraceStep", "Usage", "IngestRecord", "RunRecord",
    "ScoreRecord", "Verdict",
]
