"""A passage as the IBA-Agent's steps show it: the user's own dated lines, or a brief for a trace."""

from __future__ import annotations

import re
from typing import Any

from iba.agents.replies import CompactEvidence, EvidenceItem
from iba.retrieval.deep import REPEAT_NOTE
from iba.retrieval.passage import Passage
from iba.retrieval.salience import signal_type

_USER_LINE = re.compile(r"^\[(\d{4}-\d{2}-\d{2}) user\] ?(.*)$")


def user_view(p: Passage, limit: int = 900) -> str:
    """A passage as the user's own dated lines (what Table 12 scores), or its start if it has none."""
    lines = [line for line in p.text.splitlines() if _USER_LINE.match(line) or line.startswith(REPEAT_NOTE)]
    return ("\n".join(lines) or p.text)[:limit]


def passage_brief(p: Passage) -> dict[str, Any]:
    return {"chunk_id": p.chunk_id, "turn_ids": p.turn_ids, "score": round(p.score, 4), "facets": p.facets}


def dated_user_lines(passages: list[Passage], limit: int = 40, width: int = 240) -> list[str]:
    """The user's own lines in the passages, "date | text", each once, oldest first. Passages come
    best first: when there are more than `limit` lines, the best passages' lines are the ones kept."""
    seen: dict[str, str] = {}
    for p in passages:
        for line in p.text.splitlines():
            m = _USER_LINE.match(line)
            text = m.group(2).strip()[:width] if m else ""
            if text and text not in seen and len(seen) < limit:
                seen[text] = m.group(1)  # type: ignore[union-attr]
    return [f"{date} | {text}" for text, date in sorted(seen.items(), key=lambda x: x[1])]


def rule_compact(passages: list[Passage], limit: int = 8) -> CompactEvidence:
    """The user's lines that carry a Table 12 cue (else each passage's first user line), dated."""
    items: list[EvidenceItem] = []
    for p in passages:
        said = [(m.group(1), m.group(2)) for line in p.text.splitlines() if (m := _USER_LINE.match(line))]
        cued = [x for x in said if signal_type(x[1]) != "none"] or said[:1]
        items.extend(EvidenceItem(date=date, quote=text[:160]) for date, text in cued if text.strip())
    return CompactEvidence(items=items[:limit])
