"""Dataset: one dataset directory, read on demand. Its jobs live beside it: the files and their
layout (files), the histories and their memo (histories), the answer key and its index (keys), the
checks before a run (checks). The answer key is loaded only through `answer_keys()` /
`answer_key_for()` (evaluator side).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from functools import cached_property
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from iba.dataset.files import (DISTRACTORS, HIDDEN_FILES, PERSONA_STATES, DatasetError, invalid, read_jsonl,
                              read_jsonl_lines)
from iba.dataset.histories import HistoryMemo, history_path
from iba.dataset.keys import KeyIndex
from iba.types.common import stable_hash
from iba.types.dataset import AnswerKey, DistractorLabel, Manifest, Persona, PersonaStates, PersonaStateSpan, TaskView, Turn

M = TypeVar("M", bound=BaseModel)

log = logging.getLogger(__name__)


class Dataset:
    """A dataset directory. The answer key is loaded only through `answer_keys()` (evaluator side).

    `check()` validates the whole directory before a run; `warnings` collects what was repaired
    while reading (truncated turns), each also logged once.
    """

    def __init__(self, root: str | Path, *, answer_key: str | Path | None = None) -> None:
        self.root = Path(root)
        if not (self.root / "manifest.json").exists():
            raise DatasetError(f"{self.root}: not an IBA dataset (no manifest.json); build one with `iba build`")
        # a held-back key (`iba run --answer-key PATH`): kept outside the folder, as in a public
        # release with a hidden test split; its distractor labels, if any, sit beside it
        self.held_back = answer_key is not None
        self.answer_key_path = Path(answer_key) if answer_key is not None else self.root / "answer_key.jsonl"
        self.distractors_path = self.answer_key_path.parent / DISTRACTORS
        self.persona_states_path = self.answer_key_path.parent / PERSONA_STATES
        self.warnings: list[str] = []
        self._lines: dict[tuple[str, str], int] = {}  # (file name, record id) -> line, for check() messages
        self._histories = HistoryMemo(self.root, self.warn)
        self._key_index = KeyIndex(self.answer_key_path)

    def line(self, name: str, key: str) -> int | str:
        return self._lines.get((name, key), "?")  # "?" for a record passed in, not read from the file

    def warn(self, message: str) -> None:
        if message not in self.warnings:  # histories are re-read per run; say it once
            self.warnings.append(message)
            log.warning("warning: %s", message)

    @cached_property
    def manifest(self) -> Manifest:
        path = self.root / "manifest.json"
        try:
            text = path.read_bytes().decode("utf-8-sig")
        except UnicodeDecodeError as e:
            raise DatasetError(f"{path}: not valid UTF-8 (byte offset {e.start}); save the file as UTF-8") from None
        except OSError as e:
            raise DatasetError(f"{path}: cannot read: {e.strerror or e}") from None
        try:
            return Manifest.model_validate_json(text)
        except ValidationError as e:
            raise invalid(str(path), Manifest, e) from None

    @property
    def name(self) -> str:
        return self.manifest.name

    def _unique(self, name: str, model: type[M], field: str, path: Path | None = None) -> list[M]:
        """The records of `name` (at `path`, default in the folder), with a repeated `field` an error
        at its second line (a dict keyed by it would silently keep one of the two)."""
        path = path or self.root / name
        seen: dict[str, int] = {}
        out: list[M] = []
        for lineno, record in read_jsonl_lines(path, model):
            key = getattr(record, field)
            if key in seen:
                raise DatasetError(f"{path}:{lineno}: duplicate {field} {key!r} (first on line {seen[key]})")
            seen[key] = lineno
            out.append(record)
        self._lines.update({(name, k): n for k, n in seen.items()})
        return out

    @cached_property
    def instances(self) -> list[TaskView]:
        return self._unique("instances.jsonl", TaskView, "instance_id")

    @cached_property
    def scenario_names(self) -> tuple[str, ...]:
        """The tasks' public scenario names, sorted (Deep Retrieval's scenario contrast reads them)."""
        return tuple(sorted({t.scenario_name for t in self.instances}))

    @cached_property
    def personas(self) -> dict[str, Persona]:
        """The public personas (B, T, R). A personas.jsonl written before the states moved to the
        hidden persona_states.jsonl still loads (its states are read as the evaluator's, see
        persona_states), with a warning: that file must not be published as it is."""
        out = {p.id: p for p in self._unique("personas.jsonl", Persona, "id")}
        if any(p.states for p in out.values()):
            self.warn(f"{self.root / 'personas.jsonl'}: holds the personas' transient states (written before "
                       f"they moved to the hidden {PERSONA_STATES}); agents are never given this file, but do "
                       "not publish the folder as it is: `iba export hf DIR OUT --hold-back` writes a public copy "
                       "without them")
        return out

    def persona_states(self) -> dict[str, list[PersonaStateSpan]]:
        """User id -> transient states E (evaluator side, like the answer key): from
        persona_states.jsonl beside the key, else those an older personas.jsonl carried; users
        without states are left out."""
        return {uid: list(v) for uid, v in self._persona_states.items()}

    @cached_property
    def _persona_states(self) -> dict[str, list[PersonaStateSpan]]:
        if self.persona_states_path.exists():
            records = self._unique(PERSONA_STATES, PersonaStates, "user_id", self.persona_states_path)
            return {r.user_id: list(r.states) for r in records if r.states}
        return {uid: list(p.states) for uid, p in self.personas.items() if p.states}

    def evaluator_personas(self) -> dict[str, Persona]:
        """The personas with their transient states, for evaluator-side prompts (`iba validate`)."""
        states = self.persona_states()
        return {uid: p.model_copy(update={"states": states.get(uid, [])}) for uid, p in self.personas.items()}

    def history_path(self, user_id: str) -> Path:
        return history_path(self.root, user_id)

    def history(self, user_id: str) -> list[Turn]:
        """The user's turns, checked: unique ids, chronological order, within the size limits.
        A new list each call (callers may reorder it); the turns are shared, treat them as read-only."""
        return self._histories.get(user_id)

    def _no_key(self) -> None:
        """A DatasetError saying what to do when the folder has no key: a public release (an export
        with --hold-back, read back) keeps it elsewhere, and every command that scores takes it."""
        if not self.held_back and not self.answer_key_path.exists():
            raise DatasetError(
                f"{self.answer_key_path}: no answer key: {self.name} is a public release whose key is held back "
                "(or the file is gone); score with the key kept elsewhere: --answer-key PATH (its distractors.jsonl "
                "and persona_states.jsonl beside it; inspect: -T answer_key=PATH)")

    def answer_keys(self) -> dict[str, AnswerKey]:
        self._no_key()
        return {k.instance_id: k for k in self._unique("answer_key.jsonl", AnswerKey, "instance_id",
                                                       self.answer_key_path)}

    def answer_key_for(self, instance_id: str) -> AnswerKey | None:
        """One instance's key, read from the file now and nothing else kept (a held-back key is
        opened only once an item's agents have finished, one item at a time); the file is indexed
        once (dataset.keys), not rescanned per instance. A bad line is a DatasetError with file:line."""
        self._no_key()
        return self._key_index.get(instance_id)

    @property
    def hidden_paths(self) -> tuple[str, ...]:
        """Every file agents must never see: the answer key, distractor labels and persona states,
        in the folder and (held back) wherever the key is kept."""
        paths = [*(self.root / name for name in HIDDEN_FILES), self.answer_key_path, self.distractors_path,
                 self.persona_states_path]
        return tuple(dict.fromkeys(str(p.resolve()) for p in paths))

    def distractors(self) -> dict[str, list[DistractorLabel]]:
        """User id -> the distractor preferences in their history (evaluator side, like the answer
        key; beside a held-back key); empty when the dataset has none (imported data, builds
        before distractors)."""
        path = self.distractors_path
        out: dict[str, list[DistractorLabel]] = {}
        if not path.exists():
            return out
        for label in read_jsonl(path, DistractorLabel):
            out.setdefault(label.user_id, []).append(label)
        return out

    def check(self, instances: Iterable[TaskView] | None = None, *, answer_key: bool = True) -> list[str]:
        """Check the dataset before any agent runs (dataset.checks.check); raise DatasetError listing
        every problem found. Returns the warnings (repairs made while reading)."""
        from iba.dataset.checks import check

        return check(self, instances, answer_key=answer_key)

    def check_tasks_after_history(self, tasks: Iterable[TaskView]) -> None:
        """DatasetError, naming each instance, unless every task's `now` comes after the last turn of
        its user's history (dataset.checks.tasks_after_history)."""
        from iba.dataset.checks import tasks_after_history

        tasks_after_history(self, tasks)


def dataset_id(ds: Dataset) -> str:
    """Name plus a fingerprint of the manifest, so two different builds never share run keys."""
    return f"{ds.name}@{stable_hash(ds.manifest.model_dump(mode='json'), 8)}"


