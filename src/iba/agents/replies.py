"""The typed replies of the IBA-Agent's LLM steps (salience, compact, extract, align, slot choice) and their caps.

Each is validated by `complete_json`; as `Reply` models they ignore unknown keys but validate the
rest. The facet-query reply of query expansion lives with it in iba.retrieval.llm_expansion.
"""

from __future__ import annotations

import functools
from typing import Annotated, Any, Literal

from pydantic import Field, create_model

from iba.llm.structured import Reply

# Reply caps in tokens, from each reply model's bounds (items x characters) at a pessimistic
# 2.5 characters per token: a grammar-constrained reply always fits, so none is cut off.
SALIENCE_TOKENS_PER_PASSAGE = 16
COMPACT_TOKENS = 660
EXTRACT_TOKENS = 760
ALIGN_TOKENS = 1200
SLOT_TOKENS = 24  # {"value": ...}: the taxonomy's longest, {"value": "traditional_chinese"}, is 32 characters

PreferenceKind = Literal["asked_for", "corrected", "rejected", "repeatedly_chose", "recently_updated"]


class SalienceItem(Reply):
    relevance: Literal[0, 1, 2, 3, 4, 5, 6]  # enums, not ge/le: llama.cpp grammars enforce enums only
    signal: Literal[0, 1, 2, 3, 4]


def salience_reply_model(n: int) -> type[Reply]:
    """{"scores": [...]} with exactly n entries (the length is in the schema, so grammars enforce it)."""

    class SalienceReply(Reply):
        scores: list[SalienceItem] = Field(min_length=n, max_length=n)

    return SalienceReply


class EvidenceItem(Reply):
    date: str = Field("", max_length=10)
    quote: str = Field(min_length=1, max_length=160)


class CompactEvidence(Reply):
    items: list[EvidenceItem] = Field(max_length=8)


class Preference(Reply):
    aspect: str = Field(min_length=1, max_length=40)
    value: str = Field(min_length=1, max_length=120)
    kind: PreferenceKind = "asked_for"
    date: str = Field("", max_length=10)


class ExtractedPreferences(Reply):
    preferences: list[Preference] = Field(max_length=8)


Instruction = Annotated[str, Field(min_length=1, max_length=120)]


class SlotChoice(Reply):
    param: str = Field(max_length=40)
    value: str | int | float | bool
    because: str = Field("", max_length=80)


UNKNOWN = "unknown"


@functools.lru_cache(maxsize=512)
def slot_reply_model(values: tuple[Any, ...]) -> type[Reply]:
    """{"value": v} with v one of an API parameter's allowed values or "unknown" (a grammar enforces it)."""
    choices = tuple(dict.fromkeys((*values, UNKNOWN)))
    return create_model("SlotReply", __base__=Reply, value=(Literal[choices], ...))  # type: ignore[valid-type]


class AlignmentPlan(Reply):
    style: list[Instruction] = Field(default_factory=list, max_length=4)
    structure: list[Instruction] = Field(default_factory=list, max_length=4)
    constraints: list[Instruction] = Field(default_factory=list, max_length=4)
    slots: list[SlotChoice] = Field(default_factory=list, max_length=8)

    def lines(self) -> list[str]:
        out = [f"Style: {s}" for s in self.style] + [f"Structure: {s}" for s in self.structure]
        out += [f"Constraint: {s}" for s in self.constraints]
        out += [f"Set {s.param} = {s.value}" + (f" ({s.because})" if s.because else "") for s in self.slots]
        return out
