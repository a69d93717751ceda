"""Reading and writing IBA dataset directories.

Layout: manifest.json, personas.jsonl, histories/<user_id>.jsonl, instances.jsonl (TaskViews),
answer_key.jsonl (hidden), stats.json. Every bad record is reported with its file and line.
Writes go to a temporary file and are renamed into place, so a crash never leaves half a file.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from functools import cached_property
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from iba.types import AnswerKey, Manifest, Persona, TaskView, Turn

M = TypeVar("M", bound=BaseModel)


class DatasetError(ValueError):
    """A dataset file is missing or a record in it is malformed (message names file and line)."""


def atomic_write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_jsonl(path: Path, records: Iterable[BaseModel]) -> int:
    lines = [r.model_dump_json() for r in records]
    atomic_write_text(path, "".join(line + "\n" for line in lines))
    return len(lines)


def read_jsonl(path: Path, model: type[M]) -> Iterator[M]:
    if not path.exists():
        raise DatasetError(f"{path}: file not found")
    with path.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                yield model.model_validate_json(line)
            except ValidationError as e:
                first = e.errors()[0]
                loc = ".".join(str(x) for x in first["loc"]) or "(record)"
                raise DatasetError(f"{path}:{lineno}: invalid {model.__name__}: {loc}: {first['msg']}") from None


class Dataset:
    """A dataset directory. The answer key is loaded only through `answer_key()` (evaluator side)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        if not (self.root / "manifest.json").exists():
            raise DatasetError(f"{self.root}: not an IBA dataset (no manifest.json); build one with `iba build`")

    @cached_property
    def manifest(self) -> Manifest:
        path = self.root / "manifest.json"
        try:
            return Manifest.model_validate_json(path.read_text(encoding="utf-8"))
        except ValidationError as e:
            raise DatasetError(f"{path}:1: invalid Manifest: {e.errors()[0]['loc']}: {e.errors()[0]['msg']}") from None

    @property
    def name(self) -> str:
        return self.manifest.name

    @cached_property
    def instances(self) -> list[TaskView]:
        return list(read_jsonl(self.root / "instances.jsonl", TaskView))

    @cached_property
    def personas(self) -> dict[str, Persona]:
        return {p.id: p for p in read_jsonl(self.root / "personas.jsonl", Persona)}

    def history(self, user_id: str) -> list[Turn]:
        return list(read_jsonl(self.root / "histories" / f"{user_id}.jsonl", Turn))

    def answer_keys(self) -> dict[str, AnswerKey]:
        return {k.instance_id: k for k in read_jsonl(self.root / "answer_key.jsonl", AnswerKey)}


def write_dataset(
    root: Path,
    manifest: Manifest,
    personas: Iterable[Persona],
    histories: dict[str, list[Turn]],
    instances: Iterable[TaskView],
    answer_keys: Iterable[AnswerKey],
) -> None:
    root.mkdir(parents=True, exist_ok=True)
    write_jsonl(root / "personas.jsonl", personas)
    for user_id, turns in sorted(histories.items()):
        write_jsonl(root / "histories" / f"{user_id}.jsonl", turns)
    write_jsonl(root / "instances.jsonl", instances)
    write_jsonl(root / "answer_key.jsonl", answer_keys)
    # the manifest last: its presence marks a complete dataset
    atomic_write_text(root / "manifest.json", manifest.model_dump_json(indent=2) + "\n")


def dump_json(path: Path, obj: object) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
