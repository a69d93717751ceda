"""Reading and writing IBA dataset directories.

Layout: manifest.json, personas.jsonl (B, T, R), histories/<user_id>.jsonl, instances.jsonl (TaskViews),
answer_key.jsonl (hidden), distractors.jsonl (hidden, optional), persona_states.jsonl (hidden: the
personas' transient states E, which decide state-driven targets), stats.json. Every bad record is
reported with its file and line.
Writes go to a temporary file and are renamed into place, so a crash never leaves half a file.

Limits on what is read (see README "Dataset limits"): a turn's text longer than MAX_TURN_CHARS is
truncated with TRUNCATION_MARKER and a warning naming file:line; a history past MAX_HISTORY_TURNS
turns or MAX_HISTORY_CHARS characters is an error. Both sit far above the full benchmark (its
histories hold a few thousand short turns, well under a million characters), so they only stop
corrupt or hostile files from handing a huge string to embedding and retrieval.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from datetime import datetime, timezone
from functools import cached_property
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from iba.types import AnswerKey, DistractorLabel, Manifest, Persona, PersonaStates, PersonaStateSpan, TaskView, Turn, stable_hash

M = TypeVar("M", bound=BaseModel)

log = logging.getLogger(__name__)

MAX_TURN_CHARS = 100_000
HISTORY_MEMO = 4  # histories kept parsed per Dataset (see Dataset.history)
MAX_HISTORY_TURNS = 100_000
MAX_HISTORY_CHARS = 20_000_000
TRUNCATION_MARKER = " [... truncated by iba: turn longer than {limit} characters]"
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
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


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
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    n = 0
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            for r in records:
                f.write(r if isinstance(r, str) else r.model_dump_json())
                f.write("\n")
                n += 1
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return n


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
                    first = e.errors()[0]
                    loc = ".".join(str(x) for x in first["loc"]) or "(record)"
                    raise DatasetError(f"{path}:{lineno}: invalid {model.__name__}: {loc}: {first['msg']}") from None
                yield lineno, record
        except OSError as e:
            raise DatasetError(f"{path}: read failed: {e.strerror or e}") from None


def read_jsonl(path: Path, model: type[M]) -> Iterator[M]:
    for _, record in read_jsonl_lines(path, model):
        yield record


def _instant(ts: str) -> datetime | None:
    """An ISO 8601 timestamp as a comparable naive UTC datetime (naive ones are taken as they are)."""
    try:
        dt = datetime.fromisoformat(ts)
    except ValueError:
        return None
    return dt.astimezone(timezone.utc).replace(tzinfo=None) if dt.tzinfo else dt


def _problems(header: str, problems: list[str]) -> DatasetError:
    """One DatasetError listing the first MAX_PROBLEMS_SHOWN problems, one per line."""
    shown = problems[:MAX_PROBLEMS_SHOWN]
    more = len(problems) - len(shown)
    return DatasetError(f"{header}:\n  " + "\n  ".join(shown) + (f"\n  ... and {more} more" if more > 0 else ""))


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
        # the last few histories read, keyed by the file's (mtime, size): a run takes a user's
        # instances one after another, and parsing a history of a few thousand turns costs ~5 ms each time
        self._histories: OrderedDict[str, tuple[tuple[int, int], list[Turn]]] = OrderedDict()
        self._histories_lock = threading.Lock()

    def _line(self, name: str, key: str) -> int | str:
        return self._lines.get((name, key), "?")  # "?" for a record passed in, not read from the file

    def _warn(self, message: str) -> None:
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
            first = e.errors()[0]
            loc = ".".join(str(x) for x in first["loc"]) or "(record)"
            raise DatasetError(f"{path}: invalid Manifest: {loc}: {first['msg']}") from None

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
            self._warn(f"{self.root / 'personas.jsonl'}: holds the personas' transient states (written before "
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
        # the id comes from the data: it must not reach outside histories/ (or hold a NUL byte)
        if not user_id or user_id in (".", "..") or any(c in user_id for c in "/\\\0"):
            raise DatasetError(f"user id {user_id!r} cannot name a history file (histories/<user_id>.jsonl)")
        return self.root / "histories" / f"{user_id}.jsonl"

    def history(self, user_id: str) -> list[Turn]:
        """The user's turns, checked: unique ids, chronological order, within the size limits.
        A new list each call (callers may reorder it); the turns are shared, treat them as read-only."""
        path = self.history_path(user_id)
        try:
            st = path.stat()
            signature = (st.st_mtime_ns, st.st_size)
        except OSError:
            return self._read_history(path)  # which says what is wrong with the path
        with self._histories_lock:
            hit = self._histories.get(user_id)
            if hit is not None and hit[0] == signature:
                self._histories.move_to_end(user_id)
                return list(hit[1])
        turns = self._read_history(path)
        with self._histories_lock:
            self._histories[user_id] = (signature, turns)
            while len(self._histories) > HISTORY_MEMO:
                self._histories.popitem(last=False)
        return list(turns)

    def _read_history(self, path: Path) -> list[Turn]:
        turns: list[Turn] = []
        seen: dict[str, int] = {}
        total = 0
        prev: tuple[datetime, int] | None = None
        for lineno, turn in read_jsonl_lines(path, Turn):
            if turn.id in seen:
                raise DatasetError(f"{path}:{lineno}: duplicate turn id {turn.id!r} (first on line {seen[turn.id]})")
            seen[turn.id] = lineno
            when = _instant(turn.timestamp)
            if when is None:
                raise DatasetError(f"{path}:{lineno}: timestamp {turn.timestamp!r} is not ISO 8601 (e.g. 2025-01-31T09:00:00)")
            # out of order is an error, not a silent sort: the builder writes histories in order,
            # so a later turn stamped earlier means a corrupt or hand-edited file
            if prev is not None and when < prev[0]:
                raise DatasetError(
                    f"{path}:{lineno}: timestamp {turn.timestamp} is earlier than line {prev[1]}'s; "
                    "a history must be in chronological order"
                )
            prev = (when, lineno)
            if len(turn.text) > MAX_TURN_CHARS:
                self._warn(f"{path}:{lineno}: turn {turn.id!r} has {len(turn.text):,} characters; "
                           f"truncated to {MAX_TURN_CHARS:,}")
                turn = turn.model_copy(update={"text": turn.text[:MAX_TURN_CHARS] + TRUNCATION_MARKER.format(limit=f"{MAX_TURN_CHARS:,}")})
            total += len(turn.text)
            if len(turns) >= MAX_HISTORY_TURNS or total > MAX_HISTORY_CHARS:
                raise DatasetError(
                    f"{path}:{lineno}: history exceeds the limit of {MAX_HISTORY_TURNS:,} turns or "
                    f"{MAX_HISTORY_CHARS:,} characters (see README, Dataset limits)"
                )
            turns.append(turn)
        return turns

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
        opened only once an item's agents have finished, one item at a time). Only lines naming
        the id are parsed; a bad one is a DatasetError with file:line."""
        self._no_key()
        needles = (instance_id, json.dumps(instance_id)[1:-1])
        found: tuple[int, AnswerKey] | None = None
        path = self.answer_key_path
        try:
            f = path.open("rb")
        except OSError as e:
            raise DatasetError(f"{path}: cannot read the answer key: {e.strerror or e}") from None
        with f:
            for lineno, raw in enumerate(f, 1):
                line = raw.decode("utf-8", errors="replace")
                if not any(n in line for n in needles):
                    continue
                try:
                    key = AnswerKey.model_validate_json(raw.decode("utf-8-sig" if lineno == 1 else "utf-8"))
                except UnicodeDecodeError:
                    raise DatasetError(f"{path}:{lineno}: not valid UTF-8; save the file as UTF-8") from None
                except ValidationError as e:
                    first = e.errors()[0]
                    loc = ".".join(str(x) for x in first["loc"]) or "(record)"
                    raise DatasetError(f"{path}:{lineno}: invalid AnswerKey: {loc}: {first['msg']}") from None
                if key.instance_id != instance_id:
                    continue
                if found is not None:
                    raise DatasetError(f"{path}:{lineno}: duplicate instance_id {instance_id!r} (first on line {found[0]})")
                found = (lineno, key)
        return found[1] if found else None

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
        """Check the dataset before any agent runs; raise DatasetError listing every problem found.

        All files' records must parse; every instance's user must be a persona and its scenario
        known (against the shipped taxonomy when the dataset was built from it). For `instances`
        (default: all), each user's history must be readable and valid, and with `answer_key` each
        instance must have an answer key whose evidence turn ids are in that user's history.
        Returns the warnings (repairs made while reading).
        """
        problems: list[str] = []
        try:
            self.manifest
        except DatasetError as e:
            problems.append(str(e))
        all_tasks = self.instances  # nothing else can be checked without them: raise as is
        try:
            personas = self.personas
        except DatasetError as e:
            problems.append(str(e))
            personas = None
        inst = self.root / "instances.jsonl"
        if personas is not None:
            for t in all_tasks:
                if t.user_id not in personas:
                    problems.append(f"{inst}:{self._line('instances.jsonl', t.instance_id)}: instance "
                                    f"{t.instance_id!r}: unknown user {t.user_id!r} (not in personas.jsonl)")
        problems += self._check_scenarios(all_tasks)
        tasks = all_tasks if instances is None else list(instances)

        turn_ids: dict[str, dict[str, str] | None] = {}  # user -> turn id -> text
        for user in dict.fromkeys(t.user_id for t in tasks):
            try:
                turn_ids[user] = {turn.id: turn.text for turn in self.history(user)}
            except DatasetError as e:
                problems.append(str(e))
                turn_ids[user] = None

        if answer_key:
            try:
                keys = self.answer_keys()
            except DatasetError as e:
                problems.append(str(e))
                keys = None
            if keys is not None:
                problems += self._check_keys(tasks, keys, turn_ids)
                problems += self._check_distractors(turn_ids)
                problems += self._check_persona_states(personas)
                known = {t.instance_id for t in all_tasks}
                extra = [k for k in keys if k not in known]
                if extra:
                    self._warn(f"{self.answer_key_path}: {len(extra)} answer key(s) for instances not in "
                               f"instances.jsonl (first: {extra[0]!r} on line {self._line('answer_key.jsonl', extra[0])})")
        if problems:
            raise _problems(f"dataset {self.root} failed its check ({len(problems)} problem"
                            f"{'s' if len(problems) > 1 else ''})", problems)
        return list(self.warnings)

    def check_tasks_after_history(self, tasks: Iterable[TaskView]) -> None:
        """DatasetError, naming each instance, unless every task's `now` comes after the last turn of
        its user's history (the builder writes them so). A memory agent ingests the whole history
        before it acts: a task dated inside the history would let it remember its own future."""
        problems: list[str] = []
        inst = self.root / "instances.jsonl"
        last: dict[str, Turn | None] = {}
        for t in tasks:
            if t.user_id not in last:
                turns = self.history(t.user_id)
                last[t.user_id] = turns[-1] if turns else None
            turn = last[t.user_id]
            now = _instant(t.now)
            where = f"{inst}:{self._line('instances.jsonl', t.instance_id)}: instance {t.instance_id!r}"
            if now is None:
                problems.append(f"{where}: now {t.now!r} is not ISO 8601")
            elif turn is not None and now <= (_instant(turn.timestamp) or now):
                problems.append(f"{where}: now {t.now} is not after the last turn of {t.user_id}'s history "
                                f"({turn.id}, {turn.timestamp})")
        if problems:
            raise _problems(f"dataset {self.root}: {len(problems)} task(s) come before the end of their user's "
                            "history, so a memory agent, which ingests the whole history first, cannot be run on them",
                            problems)

    def _check_scenarios(self, tasks: list[TaskView]) -> list[str]:
        """Scenario ids against the shipped taxonomy, when this dataset was built from that version.
        Imported datasets (e.g. PrefEval) have their own scenario ids: nothing to check them against."""
        from iba.taxonomy import load_taxonomy

        version = self.manifest.taxonomy_version if "manifest" in self.__dict__ else None
        if version is None or not version.startswith("iba-taxonomy/"):
            return []
        taxonomy = load_taxonomy()
        if version != taxonomy.version:
            self._warn(f"{self.root / 'manifest.json'}: built with taxonomy {version}, not the installed "
                       f"{taxonomy.version}; scenario ids not checked")
            return []
        domains = {s.id: s.domain for s in taxonomy.scenarios()}
        out = []
        inst = self.root / "instances.jsonl"
        for t in tasks:
            where = f"{inst}:{self._line('instances.jsonl', t.instance_id)}: instance {t.instance_id!r}"
            if t.scenario not in domains:
                out.append(f"{where}: unknown scenario {t.scenario!r} (not in taxonomy {version}; "
                           "`iba taxonomy` lists them)")
            elif t.domain != domains[t.scenario]:
                out.append(f"{where}: scenario {t.scenario!r} is in domain {domains[t.scenario]!r}, not {t.domain!r}")
        return out

    def _check_keys(self, tasks: list[TaskView], keys: dict[str, AnswerKey],
                    turn_ids: dict[str, dict[str, str] | None]) -> list[str]:
        out = []
        path = self.answer_key_path
        for t in tasks:
            key = keys.get(t.instance_id)
            if key is None:
                out.append(f"{path}: no answer key for instance {t.instance_id!r} "
                           f"(instances.jsonl:{self._line('instances.jsonl', t.instance_id)})")
                continue
            ids = turn_ids.get(t.user_id)
            if ids is None:  # the history itself is broken: already reported
                continue
            refs = ([(f"checkpoint {c.id!r}", e) for c in key.checkpoints for e in c.evidence]
                    + [(f"slot {s.id!r}", e) for s in key.slots for e in s.evidence]
                    + [("evidence", e.turn_id) for e in key.evidence])
            for what, turn_id in refs:
                if turn_id not in ids:
                    out.append(f"{path}:{self._line('answer_key.jsonl', t.instance_id)}: {what} of instance "
                               f"{t.instance_id!r} cites turn {turn_id!r}, which is not in histories/{t.user_id}.jsonl")
            for e in key.evidence:
                problem = _span_problem(e.span, e.clause, ids.get(e.turn_id))
                if problem:
                    out.append(f"{path}:{self._line('answer_key.jsonl', t.instance_id)}: evidence span of instance "
                               f"{t.instance_id!r} on turn {e.turn_id!r} ({e.dimension}): {problem}")
        return out

    def _check_distractors(self, turn_ids: dict[str, dict[str, str] | None]) -> list[str]:
        """Distractor labels of the checked users must cite their turns, with spans that fit."""
        path = self.distractors_path
        if not path.exists():
            return []
        out = []
        try:
            labels = list(read_jsonl_lines(path, DistractorLabel))
        except DatasetError as e:
            return [str(e)]
        for lineno, d in labels:
            if d.user_id not in turn_ids:
                continue  # a user not being checked (or unknown: a distractor cites no instance)
            texts = turn_ids[d.user_id]
            if texts is None:
                continue
            if d.turn_id not in texts:
                out.append(f"{path}:{lineno}: distractor cites turn {d.turn_id!r}, which is not in histories/{d.user_id}.jsonl")
                continue
            problem = _span_problem(d.span, d.clause, texts[d.turn_id])
            if problem:
                out.append(f"{path}:{lineno}: distractor span on turn {d.turn_id!r}: {problem}")
        return out


    def _check_persona_states(self, personas: dict[str, Persona] | None) -> list[str]:
        """persona_states.jsonl (where there is one) must parse, each user once and a persona."""
        path = self.persona_states_path
        if not path.exists():
            return []
        try:
            self.persona_states()
        except DatasetError as e:
            return [str(e)]
        if personas is None:
            return []
        return [f"{path}:{self._line(PERSONA_STATES, uid)}: states of user {uid!r}, who is not in personas.jsonl"
                for uid in self.persona_states() if uid not in personas]


def dataset_id(ds: Dataset) -> str:
    """Name plus a fingerprint of the manifest, so two different builds never share run keys."""
    return f"{ds.name}@{stable_hash(ds.manifest.model_dump(mode='json'), 8)}"


def _span_problem(span: tuple[int, int] | None, clause: str | None, text: str | None) -> str | None:
    """Why a label's span does not point at its clause in the turn's `text`, or None if it does."""
    if span is None or text is None:
        return None
    if span[1] > len(text):
        return f"span {list(span)} runs past the turn's {len(text)} characters"
    if text[span[0]:span[1]] != clause:
        return f"text at span {list(span)} is {text[span[0]:span[1]]!r}, not the labelled clause {clause!r}"
    return None


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
