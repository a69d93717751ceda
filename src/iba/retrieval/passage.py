"""The retrieval layer's data: a Chunk (a unit of history that gets embedded) and a Passage (a hit)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from iba.types import Strict

# mixed: the token windows plus one unit per user turn (the preferences live in user lines)
Unit = Literal["token", "turn", "session", "mixed"]
Method = Literal["dense", "bm25", "hybrid"]


class Chunk(Strict):
    id: str  # position in the index, e.g. "c0012"
    text: str  # with "[date role]" prefixes so recency is visible to the reader
    turn_ids: list[str]
    timestamps: list[str]  # of the covered turns, same order


class Passage(Strict):
    chunk_id: str
    text: str
    turn_ids: list[str]
    timestamps: list[str]
    score: float  # the method's score (cosine, BM25, RRF or salience)
    query: str | None = None  # the (sub-)query that found it
    facets: list[str] = Field(default_factory=list)  # deep retrieval: which queries found it

    @property
    def latest(self) -> str:
        return max(self.timestamps) if self.timestamps else ""
