"""The LLM writer's journal: one JSON line per finished session, appended as it finishes.

The journal lives in the output directory. Its first line names the plan (a hash of the seed and
every session's key and length), the model and the scope (what the model writes); a rerun with the same options skips every session
already in the journal, so an interrupted build continues where it stopped. A torn last line
(a crash mid-write) is ignored and that session is written again.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

JOURNAL = "writer_journal.jsonl"
FORMAT = "iba-llm-writer/2"  # 2: distractors, spans, pieces with their usage, the scope


class Journal:
    def __init__(self, out_dir: Path, plan_hash: str, model: str, scope: str = "all") -> None:
        self.path = Path(out_dir) / JOURNAL
        self.entries: dict[str, dict[str, Any]] = {}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists():
            self._load(plan_hash, model, scope)
        else:
            self._write_line({"journal": FORMAT, "plan": plan_hash, "model": model, "scope": scope})

    def _load(self, plan_hash: str, model: str, scope: str) -> None:
        lines = self.path.read_text(encoding="utf-8").splitlines()
        try:
            head = json.loads(lines[0]) if lines else {}
        except json.JSONDecodeError:
            head = {}
        if head.get("journal") != FORMAT:
            raise ValueError(
                f"{self.path} was written by another version of the llm writer ({head.get('journal')}, this one "
                f"{FORMAT}): use another --out, or delete the journal to start over."
            )
        if head.get("plan") != plan_hash or head.get("model") != model or head.get("scope") != scope:
            raise ValueError(
                f"{self.path} belongs to a different build (plan {head.get('plan')}, model {head.get('model')}, "
                f"scope {head.get('scope')}; this one: plan {plan_hash}, model {model}, scope {scope}). Use the same "
                f"--seed/--preset/--noise-ratio/--history-turns/--personas, --model and --llm-scope to resume, or "
                f"another --out (or delete the journal) to start over."
            )
        good = [lines[0]]
        for line in lines[1:]:
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue  # torn line from an interrupted write
            self.entries[entry["key"]] = entry
            good.append(line)
        if len(good) != len(lines):  # drop torn lines so appends start on a clean line
            self.path.write_text("".join(g + "\n" for g in good), encoding="utf-8")

    def _write_line(self, obj: dict[str, Any]) -> None:
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(obj, ensure_ascii=False, sort_keys=True) + "\n")
            f.flush()

    def __contains__(self, key: str) -> bool:
        return key in self.entries

    def add(self, entry: dict[str, Any]) -> None:
        self._write_line(entry)
        self.entries[entry["key"]] = entry
