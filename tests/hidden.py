"""What only the evaluator may know of a dataset, as strings to grep public files for.

`evaluator_needles(root)` collects, from a dataset folder's hidden files: each persona's transient
states (id, description, start and end as stored, and their calendar dates), the answer key's
checkpoint and slot ids, expected and superseded texts, QA questions, and the evidence and
distractor clauses. `found(text, needles)` lists those a text holds.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from iba.dataset import Dataset, read_jsonl
from iba.types import DistractorLabel

# what a history holds by construction (the clauses that reveal a preference, turn dates): looked
# for everywhere but in the histories themselves
IN_HISTORIES = ("clause", "state_date")


def evaluator_needles(root: Path) -> dict[str, set[str]]:
    ds = Dataset(root)
    out: dict[str, set[str]] = {k: set() for k in ("state", "state_date", "target", "text", "clause")}
    for spans in ds.persona_states().values():
        for s in spans:
            out["state"] |= {s.state, s.description, s.start, s.end}
            out["state_date"] |= {s.start[:10], s.end[:10]}
    for key in ds.answer_keys().values():
        for c in key.checkpoints:
            out["target"].add(c.id)
            out["text"] |= {c.expected, *([c.superseded] if c.superseded else [])}
        out["target"] |= {s.id for s in key.slots}
        out["text"] |= {q.question for q in key.qa}
        out["clause"] |= {e.clause for e in key.evidence if e.clause}
    if ds.distractors_path.exists():
        out["clause"] |= {d.clause for d in read_jsonl(ds.distractors_path, DistractorLabel) if d.clause}
    # short strings (a clause of three words) would match by chance: only distinctive ones
    return {k: {n for n in v if len(n) >= 8} for k, v in out.items()}


def found(text: str, needles: dict[str, set[str]], *, skip: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    return sorted((kind, n) for kind, ns in needles.items() if kind not in skip for n in ns if n in text)


def parquet_text(path: Path) -> str:
    """A parquet file's rows as JSON text (the bytes on disk are compressed: grep the values)."""
    import pyarrow.parquet as pq

    rows: list[dict[str, Any]] = pq.read_table(path).to_pylist()
    return "\n".join(json.dumps(r, ensure_ascii=False, default=str) for r in rows)
