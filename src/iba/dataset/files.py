"""A dataset directory's files: JSON lines read with file:line errors, atomic writes.

Layout: manifest.json, personas.jsonl (B, T, R), histories/<user_id>.jsonl, instances.jsonl (TaskViews),
answer_key.jsonl (hidden), distractors.jsonl (hidden, optional), persona_states.jsonl (hidden: the
personas' transient states E, which decide state-driven targets), stats.json. Every bad record is
reported with its file and line.
Writes go to a temporary file and are renamed into place, so a crash never leaves half a file.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from iba.atomic import atomic_file
from iba.types.dataset import AnswerKey, DistractorLabel, Manifest, Persona, PersonaStates, TaskView, Turn

M = TypeVar("M", bound=BaseModel)

MAX_PROBLEMS_SHOWN = 20
ANSWER_KEY = "answer_key.jsonl"
DISTRACTORS = "distractors.jsonl"
PERSONA_STATES = "persona_states.jsonl"
# the evaluator's files: never shown to an agent, held back from a public release, kept together
# (a held-back key's distractor labels and persona states sit beside it)
HIDDEN_FILES = (ANSWER_KEY, DISTRACTORS, PERSONA_STATES)


class DatasetError(ValueError):
    """A dataset file is missing or a record in it is malformed (message names file and line)."""


def atomic_write_text(path: Path, text: str) -> None:
    with atomic_file(path) as f:
        f.write(text)


_quote = json.encoder.encode_basestring  # type: ignore[attr-defined]  # a JSON string, non-ASCII kept (as pydantic writes it)


def turn_line(id: str, session_id: str, timestamp: str, role: str, text: str) -> str:
    """The JSON of Turn(...).model_dump_json(), byte for byte, without building the model (the
    full build writes ~2 million turns; tests/test_dataset.py compares the two)."""
    return (f'{{"id":{_quote(id)},"session_id":{_quote(session_id)},"timestamp":{_quote(timestamp)},'
            f'"role":{_quote(role)},"text":{_quote(text)}}}')


def write_jsonl(path: Path, records: Iterable[BaseModel | str]) -> int:
    """One record per line (a str is a record's JSON already), streamed into a temporary file that
    is renamed into place (the full build writes ~135,000 distractor labels: held as one string
    they cost hundreds of MB)."""
    n = 0
    with atomic_file(path) as f:
        for r in records:
            f.write(r if isinstance(r, str) else r.model_dump_json())
            f.write("\n")
            n += 1
    return n


def invalid(where: str, model: type[BaseModel], e: ValidationError) -> DatasetError:
    """The DatasetError of a record that does not validate: `where` (file:line), the model and its first problem."""
    first = e.errors()[0]
    loc = ".".join(str(x) for x in first["loc"]) or "(record)"
    return DatasetError(f"{where}: invalid {model.__name__}: {loc}: {first['msg']}")


def read_jsonl_lines(path: Path, model: type[M]) -> Iterator[tuple[int, M]]:
    """(line number, record) for every non-blank line; any problem is a DatasetError naming file:line."""
    try:
        f = path.open("rb")  # bytes: a bad byte is reported with its line, not as a UnicodeDecodeError
    except FileNotFoundError:
        raise DatasetError(f"{path}: file not found") from None
    except OSError as e:  # a directory, no permission, ...
        raise DatasetError(f"{path}: cannot read: {e.strerror or e}") from None
    with f:
        try:
            for lineno, raw in enumerate(f, 1):
                try:
                    # utf-8-sig on line 1: editors on Windows prepend a byte-order mark
                    line = raw.decode("utf-8-sig" if lineno == 1 else "utf-8")
                except UnicodeDecodeError as e:
                    raise DatasetError(
                        f"{path}:{lineno}: not valid UTF-8 (byte {raw[e.start]:#04x} at column {e.start + 1}); "
                        "save the file as UTF-8"
                    ) from None
                if not line.strip():
                    continue
                try:
                    record = model.model_validate_json(line)
                except ValidationError as e:
                    raise invalid(f"{path}:{lineno}", model, e) from None
                yield lineno, record
        except OSError as e:
            raise DatasetError(f"{path}: read failed: {e.strerror or e}") from None


def read_jsonl(path: Path, model: type[M]) -> Iterator[M]:
    for _, record in read_jsonl_lines(path, model):
        yield record


def instant(ts: str) -> datetime | None:
    """An ISO 8601 timestamp as a comparable naive UTC datetime (naive ones are taken as they are)."""
    try:
        dt = datetime.fromisoformat(ts)
    except ValueError:
        return None
    return dt.astimezone(timezone.utc).replace(tzinfo=None) if dt.tzinfo else dt


def problem_list(header: str, problems: list[str]) -> DatasetError:
    """One DatasetError listing the first MAX_PROBLEMS_SHOWN problems, one per line."""
    shown = problems[:MAX_PROBLEMS_SHOWN]
    more = len(problems) - len(shown)
    return DatasetError(f"{header}:\n  " + "\n  ".join(shown) + (f"\n  ... and {more} more" if more > 0 else ""))


def write_dataset(
    root: Path,
    manifest: Manifest,
    personas: Iterable[Persona],
    histories: dict[str, list[Turn]],
    instances: Iterable[TaskView],
    answer_keys: Iterable[AnswerKey],
    distractors: Iterable[DistractorLabel] | None = None,
) -> None:
    """Histories first, then instances and answer keys (iterables are consumed in that order, so
    keys may be computed from what writing the histories recorded), the manifest last.

    The personas' transient states go to the hidden persona_states.jsonl (users without states
    left out; no file when no persona has any), never to personas.jsonl."""
    root.mkdir(parents=True, exist_ok=True)
    personas = list(personas)
    write_jsonl(root / "personas.jsonl", personas)  # Persona.states is never serialised
    states = [PersonaStates(user_id=p.id, states=p.states) for p in personas if p.states]
    if states:
        write_jsonl(root / PERSONA_STATES, states)
    else:  # a rebuild into the same folder must not leave another build's states
        (root / PERSONA_STATES).unlink(missing_ok=True)
    for user_id, turns in sorted(histories.items()):
        write_jsonl(root / "histories" / f"{user_id}.jsonl", turns)
    write_jsonl(root / "instances.jsonl", instances)
    write_jsonl(root / ANSWER_KEY, answer_keys)
    if distractors is not None:
        write_jsonl(root / DISTRACTORS, distractors)
    else:  # a rebuild into the same folder must not leave another build's labels
        (root / DISTRACTORS).unlink(missing_ok=True)
    # the manifest last: its presence marks a complete dataset
    atomic_write_text(root / "manifest.json", manifest.model_dump_json(indent=2) + "\n")


def dump_json(path: Path, obj: object) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
