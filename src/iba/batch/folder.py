"""A batch folder: rounds of request files, the results that came back, and what each call's state is.

A call (custom_id) is
- answered: a result line with status 200 exists: replayed;
- awaiting: it is in more rounds than it has failed results (sent, nothing back yet): not written again;
- rejected: its last result is a 4xx other than 408/409/429 (the request itself is bad; sending it
  again would not help): replayed as that error, so the work is errored as in a direct run;
- given up: MAX_ATTEMPTS failed results (5xx, 429, expired, cancelled): replayed as an error;
- new: written into the next round.
Every file is written atomically (a temporary file renamed into place): a killed command leaves
the folder as it was before it; and scrubbed of the configured secrets (llm.secrets), as the store is.
"""

from __future__ import annotations

import json
import re
import threading
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from iba.batch.lines import RequestLine, ResultLine, same_model
from iba.dataset import atomic_write_text
from iba.llm.secrets import redact_stored

FORMAT = "iba-batch/1"
MAX_ATTEMPTS = 3  # failed results (5xx, 429, expired) after which a call is given up as errored
_RETRYABLE_4XX = {408, 409, 429}


class BatchError(ValueError):
    """A batch folder or results file that cannot be used (the message names the file and line)."""


def model_slug(model_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", model_id).strip("_")[:80] or "model"


def read_lines(path: Path, model: type, what: str) -> list[tuple[int, Any]]:
    """(line number, record) of every non-blank line of a Batch API file; BatchError names file:line."""
    out = []
    try:
        raw = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError:
        raise BatchError(f"{path}: not valid UTF-8") from None
    except OSError as e:
        raise BatchError(f"{path}: cannot read: {e.strerror or e}") from None
    for lineno, line in enumerate(raw.splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append((lineno, model.model_validate_json(line)))
        except ValidationError as e:
            first = e.errors()[0]
            loc = ".".join(str(x) for x in first["loc"]) or "(line)"
            raise BatchError(f"{path}:{lineno}: not a Batch API {what} line: {loc}: {first['msg']}") from None
    return out


class BatchFolder:
    """The folder of `iba run --batch DIR`. Calls asked for during a run are collected with
    `want()`; `flush()` writes the new ones as the next round."""

    def __init__(self, root: str | Path, *, create: bool = False) -> None:
        self.root = Path(root)
        meta = self.root / "batch.json"
        if not meta.exists():
            if not create:
                raise BatchError(f"{self.root}: not a batch folder (no batch.json); `iba run ... --batch {self.root}` makes one")
            if self.root.exists() and not self.root.is_dir():
                raise BatchError(f"{self.root}: exists and is not a folder")
            if self.root.exists() and any(self.root.iterdir()):
                raise BatchError(f"{self.root}: exists, is not empty and is not a batch folder (no batch.json)")
            atomic_write_text(meta, json.dumps({"format": FORMAT, "created": utc_now()}, indent=2) + "\n")
        else:
            try:
                fmt = json.loads(meta.read_text(encoding="utf-8")).get("format")
            except (OSError, ValueError, AttributeError):
                fmt = None
            if fmt != FORMAT:
                raise BatchError(f"{meta}: not a batch folder of this version (format {fmt!r}, expected {FORMAT})")
        self._lock = threading.Lock()
        self._wanted: dict[str, tuple[str, RequestLine]] = {}  # custom_id -> (model id, line)
        self.reload()

    # ------------------------------------------------------------------ reading

    def rounds(self) -> list[Path]:
        return sorted(p for p in self.root.glob("round-*") if p.is_dir() and re.fullmatch(r"round-\d{4,}", p.name))

    def request_files(self, round_dir: Path | None = None) -> list[Path]:
        dirs = [round_dir] if round_dir is not None else self.rounds()
        return [f for d in dirs for f in sorted(d.glob("*.requests.jsonl"))]

    def result_files(self) -> list[Path]:
        return sorted((self.root / "results").glob("*.jsonl"))

    def reload(self) -> None:
        """Read every round's requests and every result (after another command added some)."""
        self.requests: dict[str, RequestLine] = {}
        self.sent: Counter[str] = Counter()  # custom_id -> rounds it is in
        for f in self.request_files():
            for _, line in read_lines(f, RequestLine, "request"):
                self.requests.setdefault(line.custom_id, line)
                self.sent[line.custom_id] += 1
        self.answers: dict[str, ResultLine] = {}
        self.answered_where: dict[str, str] = {}  # custom_id -> file:line of its answer
        self.failures: dict[str, list[ResultLine]] = {}
        for f in self.result_files():
            for lineno, line in read_lines(f, ResultLine, "output"):
                if line.ok:
                    if line.custom_id not in self.answers:
                        self.answers[line.custom_id] = line
                        self.answered_where[line.custom_id] = f"{f}:{lineno}"
                else:
                    self.failures.setdefault(line.custom_id, []).append(line)

    def state(self, custom_id: str) -> str:
        """answered, rejected, given_up, awaiting or new (see the module doc)."""
        if custom_id in self.answers:
            return "answered"
        failed = self.failures.get(custom_id, [])
        if failed:
            last = failed[-1]
            status = last.response.status_code if last.response is not None else None
            if status is not None and 400 <= status < 500 and status not in _RETRYABLE_4XX:
                return "rejected"
            if len(failed) >= MAX_ATTEMPTS:
                return "given_up"
        return "awaiting" if self.sent[custom_id] > len(failed) else "new"

    def awaiting(self) -> list[str]:
        return [cid for cid in self.requests if self.state(cid) == "awaiting"]

    # ------------------------------------------------------------------ a run

    def want(self, model_id: str, line: RequestLine) -> None:
        with self._lock:
            self._wanted.setdefault(line.custom_id, (model_id, line))

    def flush(self) -> tuple[Path | None, int, int]:
        """Write the wanted calls that are new as the next round (one file per model); returns
        (round folder or None, requests written, wanted calls still awaiting an earlier round)."""
        with self._lock:
            wanted, self._wanted = self._wanted, {}
        new: dict[str, list[RequestLine]] = {}
        waiting = 0
        for cid, (model_id, line) in wanted.items():
            if self.state(cid) == "awaiting":
                waiting += 1
            else:
                new.setdefault(model_id, []).append(line)
        if not new:
            return None, 0, waiting
        rounds = self.rounds()
        number = int(rounds[-1].name.split("-")[1]) + 1 if rounds else 1
        round_dir = self.root / f"round-{number:04d}"
        for model_id, lines in new.items():
            text = "".join(line.model_dump_json() + "\n" for line in sorted(lines, key=lambda x: x.custom_id))
            atomic_write_text(round_dir / f"{model_slug(model_id)}.requests.jsonl", redact_stored(text))
        meta = json.loads((self.root / "batch.json").read_text(encoding="utf-8"))
        models = meta.setdefault("models", {})
        for model_id in new:
            models[model_slug(model_id)] = model_id
        atomic_write_text(self.root / "batch.json", json.dumps(meta, indent=2, sort_keys=True) + "\n")
        self.reload()
        return round_dir, sum(len(v) for v in new.values()), waiting

    # ------------------------------------------------------------------ results in

    def add_results(self, lines: list[ResultLine], source: str) -> Path:
        """Store result lines (every custom_id must be one of this folder's requests, answered at most
        once: see check_once) as a new results file named after `source`; returns its path."""
        unknown = [x.custom_id for x in lines if x.custom_id not in self.requests]
        if unknown:
            raise BatchError(f"{len(unknown)} result(s) for requests this folder never wrote (first: {unknown[0]!r})")
        self.check_once(list(enumerate(lines, 1)), source)
        stem = re.sub(r"[^A-Za-z0-9._-]+", "_", source)[:60]
        existing = {p.name for p in self.result_files()}
        n = len(existing) + 1
        while f"{n:04d}-{stem}.jsonl" in existing:
            n += 1
        path = self.root / "results" / f"{n:04d}-{stem}.jsonl"
        atomic_write_text(path, redact_stored("".join(x.model_dump_json(exclude_none=False) + "\n" for x in lines)))
        self.reload()
        return path

    def read_results_file(self, path: Path) -> list[ResultLine]:
        """A results file from elsewhere (`iba batch import`), every line checked: its shape, that its
        custom_id is one of this folder's requests, and that it answers it once (file:line otherwise)."""
        numbered = read_lines(path, ResultLine, "output")
        for lineno, line in numbered:
            if line.custom_id not in self.requests:
                raise BatchError(f"{path}:{lineno}: custom_id {line.custom_id!r} is not a request of {self.root}")
        self.check_once(numbered, str(path))
        return [line for _, line in numbered]

    def check_once(self, numbered: list[tuple[int, ResultLine]], where: str) -> None:
        """BatchError (where:line) for a custom_id that a results file holds twice, or that it answers
        when the folder holds an answer already: which of two answers is the call's is not for iba to
        guess. A failed result beside others is fine (failures are counted, then sent again)."""
        first: dict[str, int] = {}
        for lineno, line in numbered:
            if line.custom_id in first:
                raise BatchError(f"{where}:{lineno}: custom_id {line.custom_id!r} again (first on line "
                                 f"{first[line.custom_id]}); a results file holds one result per request")
            first[line.custom_id] = lineno
            if line.ok and line.custom_id in self.answers:
                raise BatchError(f"{where}:{lineno}: custom_id {line.custom_id!r} is answered already "
                                 f"({self.answered_where[line.custom_id]}); remove one of the two answers")

    def other_models(self, numbered: list[tuple[int, ResultLine]]) -> list[tuple[int, str, str]]:
        """(line, model asked, model that answered) of every answer from another model than its
        request's (a dated snapshot of the same name is the same model)."""
        out = []
        for lineno, line in numbered:
            asked = self.requests[line.custom_id].body.get("model") if line.custom_id in self.requests else None
            if line.ok and not same_model(asked, line.answered_by):
                out.append((lineno, str(asked), str(line.answered_by)))
        return out

    def answered_by(self) -> Counter[tuple[str, str]]:
        """(model asked, model that answered) -> answers, over every answer held."""
        return Counter((str(self.requests[cid].body.get("model")), line.answered_by or "(not named)")
                       for cid, line in self.answers.items() if cid in self.requests)

    def status(self) -> dict[str, Any]:
        states = Counter(self.state(cid) for cid in self.requests)
        return {"rounds": len(self.rounds()), "requests": len(self.requests), **{k: states.get(k, 0) for k in
                ("answered", "awaiting", "new", "rejected", "given_up")}}


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
