"""Open SQLite files in WAL mode when several processes may create the same file at once."""

from __future__ import annotations

import sqlite3
import time


def enable_wal(db: sqlite3.Connection, timeout_s: float = 30.0) -> None:
    """Switch `db` to WAL. Processes opening a new file at once race here, and SQLite answers the
    loser "database is locked" at once, without its busy timeout (measured: 25 and 41 of 600 opens,
    three processes on each of 200 new files): retry."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)
