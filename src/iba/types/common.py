"""The shared base of every contract (Strict: extra fields are errors), the literal types, stable_hash."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict


ActionType = Literal["generate", "call_api"]
Role = Literal["user", "assistant"]
# Table 12 of the paper: the four kinds of preference evidence, strongest first.
SignalType = Literal["explicit_revision", "complaint", "direct_statement", "implicit_pattern"]
SIGNAL_TYPES: tuple[str, ...] = ("explicit_revision", "complaint", "direct_statement", "implicit_pattern")
ParamType = Literal["string", "integer", "number", "boolean"]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# Before a QA probe was a field (RunRecord.probe, TaskView.probe), its run's instance_id was
# "<instance>::qa::<probe>": a run key still hashes that id, so stores written then resume, and a
# record written then reads back split (RunRecord's validator; run/store.py migrates the column).
LEGACY_QA = "::qa::"


def item_id(instance_id: str, probe: str | None) -> str:
    """The id a run key hashes: the instance's, or "<instance>::qa::<probe>" for a QA probe."""
    return f"{instance_id}{LEGACY_QA}{probe}" if probe else instance_id


def split_item_id(item_id: str) -> tuple[str, str | None]:
    """'inst::qa::probe' -> ('inst', 'probe'); an instance id -> (id, None)."""
    base, _, probe = item_id.partition(LEGACY_QA)
    return base, probe or None


def stable_hash(obj: Any, n: int = 16) -> str:
    """A short content hash of any JSON-able object (sorted keys, so order-independent)."""
    data = json.dumps(obj, sort_keys=True, ensure_ascii=False, default=str).encode()
    return hashlib.sha256(data).hexdigest()[:n]
