"""Histories read and checked, and the last few kept parsed (a locked memo keyed by file signature).

Limits on what is read (see README "Dataset limits"): a turn's text longer than MAX_TURN_CHARS is
truncated with TRUNCATION_MARKER and a warning naming file:line; a history past MAX_HISTORY_TURNS
turns or MAX_HISTORY_CHARS characters is an error. Both sit far above the full benchmark (its
histories hold a few thousand short turns, well under a million characters), so they only stop
corrupt or hostile files from handing a huge string to embedding and retrieval.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from iba.dataset.files import DatasetError, instant, read_jsonl_lines
from iba.types.dataset import Turn

MAX_TURN_CHARS = 100_000
HISTORY_MEMO = 4  # histories kept parsed per Dataset (see HistoryMemo)
MAX_HISTORY_TURNS = 100_000
MAX_HISTORY_CHARS = 20_000_000
TRUNCATION_MARKER = " [... truncated by iba: turn longer than {limit} characters]"


def history_path(root: Path, user_id: str) -> Path:
    # the id comes from the data: it must not reach outside histories/ (or hold a NUL byte)
    if not user_id or user_id in (".", "..") or any(c in user_id for c in "/\\\0"):
        raise DatasetError(f"user id {user_id!r} cannot name a history file (histories/<user_id>.jsonl)")
    return root / "histories" / f"{user_id}.jsonl"


def read_history(path: Path, warn: Callable[[str], None]) -> list[Turn]:
    """The turns of one history file: unique ids, chronological order, within the size limits
    (a turn too long is truncated and `warn`ed about)."""
    turns: list[Turn] = []
    seen: dict[str, int] = {}
    total = 0
    prev: tuple[datetime, int] | None = None
    for lineno, turn in read_jsonl_lines(path, Turn):
        if turn.id in seen:
            raise DatasetError(f"{path}:{lineno}: duplicate turn id {turn.id!r} (first on line {seen[turn.id]})")
        seen[turn.id] = lineno
        when = instant(turn.timestamp)
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
            warn(f"{path}:{lineno}: turn {turn.id!r} has {len(turn.text):,} characters; truncated to {MAX_TURN_CHARS:,}")
            turn = turn.model_copy(update={"text": turn.text[:MAX_TURN_CHARS] + TRUNCATION_MARKER.format(limit=f"{MAX_TURN_CHARS:,}")})
        total += len(turn.text)
        if len(turns) >= MAX_HISTORY_TURNS or total > MAX_HISTORY_CHARS:
            raise DatasetError(
                f"{path}:{lineno}: history exceeds the limit of {MAX_HISTORY_TURNS:,} turns or "
                f"{MAX_HISTORY_CHARS:,} characters (see README, Dataset limits)"
            )
        turns.append(turn)
    return turns


class HistoryMemo:
    """The last few histories read, keyed by the file's (mtime, size): a run takes a user's
    instances one after another, and parsing a history of a few thousand turns costs ~5 ms each time.
    Thread-safe (agents of one process read histories at once)."""

    def __init__(self, root: Path, warn: Callable[[str], None], size: int = HISTORY_MEMO) -> None:
        self.root = root
        self._warn = warn
        self._size = size
        self._memo: OrderedDict[str, tuple[tuple[int, int], list[Turn]]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, user_id: str) -> list[Turn]:
        """The user's turns, checked. A new list each call (callers may reorder it); the turns are
        shared, treat them as read-only."""
        path = history_path(self.root, user_id)
        try:
            st = path.stat()
            signature = (st.st_mtime_ns, st.st_size)
        except OSError:
            return read_history(path, self._warn)  # which says what is wrong with the path
        with self._lock:
            hit = self._memo.get(user_id)
            if hit is not None and hit[0] == signature:
                self._memo.move_to_end(user_id)
                return list(hit[1])
        turns = read_history(path, self._warn)
        with self._lock:
            self._memo[user_id] = (signature, turns)
            while len(self._memo) > self._size:
                self._memo.popitem(last=False)
        return list(turns)
