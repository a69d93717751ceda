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


def stable_hash(obj: Any, n: int = 16) -> str:
    """A short content hash of any JSON-able object (sorted keys, so order-independent)."""
    data = json.dumps(obj, sort_keys=True, ensure_ascii=False, default=str).encode()
    return hashlib.sha256(data).hexdigest()[:n]
