"""The answer key file (in the folder or held back elsewhere), read a whole or one instance at a time.

A held-back key is opened only once an item's agents have finished, one item at a time, and no
parsed key is kept. To find an item's line without rescanning the file per item (quadratic in the
number of instances), the file is indexed once: instance id -> byte offset of its line, only the
ids parsed. The index follows the file: a changed size or mtime indexes it again.
"""

from __future__ import annotations

import threading
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from iba.dataset.files import DatasetError, invalid
from iba.types.dataset import AnswerKey


class _Id(BaseModel):
    """Only a key line's instance id (the rest is left unvalidated until the line is asked for)."""

    model_config = ConfigDict(extra="ignore")
    instance_id: str


class KeyIndex:
    """instance id -> (line number, byte offset) of answer_key.jsonl at `path`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._signature: tuple[int, int] | None = None
        self._lines: dict[str, tuple[int, int]] = {}
        self._duplicates: dict[str, tuple[int, int]] = {}  # id -> (first line, second line)
        self._unread: DatasetError | None = None  # the first line whose id could not be read
        self.scans = 0  # times the file was indexed (tests: once per file version, not per item)

    def _open(self):  # noqa: ANN202 - a binary file
        try:
            return self.path.open("rb")
        except OSError as e:
            raise DatasetError(f"{self.path}: cannot read the answer key: {e.strerror or e}") from None

    def _current(self) -> None:
        try:
            st = self.path.stat()
        except OSError:
            self._open()  # raises the error that says what is wrong
            raise
        signature = (st.st_mtime_ns, st.st_size)
        if signature == self._signature:
            return
        lines: dict[str, tuple[int, int]] = {}
        duplicates: dict[str, tuple[int, int]] = {}
        unread: DatasetError | None = None
        with self._open() as f:
            offset = 0
            for lineno, raw in enumerate(f, 1):
                start, offset = offset, offset + len(raw)
                if not raw.strip():
                    continue
                try:
                    iid = _Id.model_validate_json(raw[3:] if lineno == 1 and raw.startswith(b"\xef\xbb\xbf") else raw).instance_id
                except ValidationError:
                    # said when an id the index lacks is asked for: the missing key may be on this line
                    if unread is None:
                        bad = self._parse(lineno, raw)
                        unread = bad if isinstance(bad, DatasetError) else None
                    continue
                if iid in lines:
                    duplicates.setdefault(iid, (lines[iid][0], lineno))
                else:
                    lines[iid] = (lineno, start)
        self._lines, self._duplicates, self._unread, self._signature = lines, duplicates, unread, signature
        self.scans += 1

    def _parse(self, lineno: int, raw: bytes) -> DatasetError | AnswerKey:
        try:
            return AnswerKey.model_validate_json(raw.decode("utf-8-sig" if lineno == 1 else "utf-8"))
        except UnicodeDecodeError:
            return DatasetError(f"{self.path}:{lineno}: not valid UTF-8; save the file as UTF-8")
        except ValidationError as e:
            return invalid(f"{self.path}:{lineno}", AnswerKey, e)

    def get(self, instance_id: str) -> AnswerKey | None:
        """One instance's key, parsed from its line now; None when the file has none (a line
        whose id could not be read is the error then); a repeated id or a bad line is a
        DatasetError with file:line."""
        with self._lock:
            self._current()
            where = self._lines.get(instance_id)
            dup = self._duplicates.get(instance_id)
            unread = self._unread
        if dup is not None:
            raise DatasetError(f"{self.path}:{dup[1]}: duplicate instance_id {instance_id!r} (first on line {dup[0]})")
        if where is None:
            if unread is not None:
                raise unread
            return None
        lineno, offset = where
        with self._open() as f:
            f.seek(offset)
            raw = f.readline()
        key = self._parse(lineno, raw)
        if isinstance(key, DatasetError):
            raise key
        return key
