"""The parquet configs of an exported dataset: their arrow schemas and the record <-> row mapping.

Columns are typed (strings, ints, lists, structs) wherever the contract in iba.types has one
shape. Free-form values (an API's JSON schema, a verifier's params, a slot's accepted values of
mixed types, task-fixed params, a persona's background) are JSON text columns, because parquet
wants one type per column and those have none; `from_row` decodes them, so a record read back is
equal to the one written.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable

from pydantic import BaseModel

from iba.types import AnswerKey, DistractorLabel, Persona, PersonaStates, TaskView, Turn

SPLIT = "test"


def _dumps(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False, sort_keys=True)


def _loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


@dataclass(frozen=True)
class Config:
    """One parquet config: its name, what it holds, the pydantic model of a record, and whether a
    public release holds it back (evaluator-only: the answer key, distractor labels and persona states)."""

    name: str
    description: str
    model: type[BaseModel]
    hidden: bool
    schema: Callable[[Any], Any]  # pyarrow module -> pa.Schema
    encode: Callable[[dict[str, Any]], dict[str, Any]]  # model_dump(mode="json") -> row
    decode: Callable[[dict[str, Any]], dict[str, Any]]  # row -> model_validate input

    def to_row(self, record: BaseModel) -> dict[str, Any]:
        return self.encode(record.model_dump(mode="json"))

    def from_row(self, row: dict[str, Any]) -> BaseModel:
        return self.model.model_validate(self.decode(dict(row)))


def _fields(row: dict[str, Any], **codecs: Callable[[Any], Any]) -> dict[str, Any]:
    return {k: (codecs[k](v) if k in codecs else v) for k, v in row.items()}


# --------------------------------------------------------------------------- schemas


def _span(pa: Any) -> Any:
    return pa.list_(pa.int32())


def _instances_schema(pa: Any) -> Any:
    s = pa.string()
    return pa.schema([("instance_id", s), ("user_id", s), ("domain", s), ("scenario", s), ("scenario_name", s),
                      ("query", s), ("action", s), ("api_name", s), ("api_schema", s), ("now", s)])


def _histories_schema(pa: Any) -> Any:
    s = pa.string()
    return pa.schema([("user_id", s), ("position", pa.int32()), ("id", s), ("session_id", s), ("timestamp", s),
                      ("role", s), ("text", s)])


def _personas_schema(pa: Any) -> Any:
    s = pa.string()
    return pa.schema([("id", s), ("name", s), ("background", s), ("traits", pa.list_(s)), ("role", s)])


def _persona_states_schema(pa: Any) -> Any:
    s = pa.string()
    state = pa.struct([("state", s), ("description", s), ("start", s), ("end", s)])
    return pa.schema([("user_id", s), ("states", pa.list_(state))])


def _answer_key_schema(pa: Any) -> Any:
    s, ids = pa.string(), pa.list_(pa.string())
    checkpoint = pa.struct([("id", s), ("dimension", s), ("dimension_name", s), ("value", s), ("expected", s),
                            ("kind", s), ("superseded", s), ("source", s), ("evidence", ids), ("verifier", s)])
    slot = pa.struct([("id", s), ("param", s), ("dimension", s), ("value", s), ("accepted", s), ("kind", s),
                      ("source", s), ("evidence", ids)])
    evidence = pa.struct([("turn_id", s), ("signal_type", s), ("dimension", s), ("value", s), ("timestamp", s),
                          ("superseded", pa.bool_()), ("span", _span(pa)), ("clause", s)])
    probe = pa.struct([("id", s), ("target", s), ("question", s), ("options", ids), ("answer", pa.int32())])
    return pa.schema([("instance_id", s), ("checkpoints", pa.list_(checkpoint)), ("slots", pa.list_(slot)),
                      ("evidence", pa.list_(evidence)), ("qa", pa.list_(probe)), ("fixed_params", s)])


def _distractors_schema(pa: Any) -> Any:
    s = pa.string()
    return pa.schema([("user_id", s), ("turn_id", s), ("form", s), ("scenario", s), ("dimension", s),
                      ("value", s), ("signal_type", s), ("span", _span(pa)), ("clause", s)])


# --------------------------------------------------------------------------- codecs


def _key_codec(code: Callable[[Any], Any]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The answer key's JSON-typed fields through `code` (_dumps to write, _loads to read)."""
    return lambda row: _fields(
        row,
        checkpoints=lambda cps: [dict(c, verifier=code(c["verifier"])) for c in cps],
        slots=lambda slots: [dict(s, accepted=code(s["accepted"])) for s in slots],
        fixed_params=code,
    )


INSTANCES = Config(
    "instances", "the tasks agents see (TaskView): the request, its time, the action kind and API schema; "
    "`user_id` names the history (config `histories`) and the persona (config `personas`)",
    TaskView, False, _instances_schema,
    encode=lambda r: _fields(r, api_schema=_dumps), decode=lambda r: _fields(r, api_schema=_loads),
)
HISTORIES = Config(
    "histories", "every user's conversation history, one row per turn, in order (`position`)",
    Turn, False, _histories_schema,
    encode=lambda r: r, decode=lambda r: {k: v for k, v in r.items() if k not in ("user_id", "position")},
)
PERSONAS = Config(
    "personas", "the users as agents may know them: background B, traits T, role R (their transient states "
    "E are evaluator-only: config `persona_states`)",
    Persona, False, _personas_schema,
    # an export written before the split has a `states` column: read as the evaluator's (Persona.states)
    encode=lambda r: _fields(r, background=_dumps), decode=lambda r: _fields(r, background=_loads),
)
ANSWER_KEY = Config(
    "answer_key", "evaluator-only: checkpoints, slots, evidence labels (with spans), QA probes",
    AnswerKey, True, _answer_key_schema, encode=_key_codec(_dumps), decode=_key_codec(_loads),
)
DISTRACTORS = Config(
    "distractors", "evaluator-only: preference-shaped turns no task depends on (hard negatives for retrieval)",
    DistractorLabel, True, _distractors_schema, encode=lambda r: r, decode=lambda r: r,
)

PERSONA_STATES = Config(
    "persona_states", "evaluator-only: each persona's transient states E with their dates (they decide the "
    "state-driven slots and checkpoints, so they are answers)",
    PersonaStates, True, _persona_states_schema, encode=lambda r: r, decode=lambda r: r,
)

CONFIGS: tuple[Config, ...] = (INSTANCES, HISTORIES, PERSONAS, ANSWER_KEY, DISTRACTORS, PERSONA_STATES)


def parquet_path(config: str) -> str:
    """Where a config's single shard lives, relative to the export's root (the Hub's naming)."""
    return f"{config}/{SPLIT}-00000-of-00001.parquet"
