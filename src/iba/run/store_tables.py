"""What every table of a result store (run/store.py) reads and creates with: the connection and its
lock (the Store holds them), a table created on first use, and "the records, oldest first"."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from typing import TypeVar

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)


class StoreTables:
    _db: sqlite3.Connection
    _lock: threading.Lock

    def _create(self, schema: str) -> None:
        with self._lock:
            self._db.executescript(schema)

    def _records(self, model: type[M], table: str, column: str | None = None, value: object = None) -> Iterator[M]:
        """Every `record` of `table` (those whose `column` is `value` if both are given), oldest first,
        read at once and parsed one at a time."""
        sql, args = f"SELECT record FROM {table}", ()
        if column is not None and value is not None:
            sql, args = f"{sql} WHERE {column}=?", (value,)
        with self._lock:
            rows = self._db.execute(sql + " ORDER BY rowid", args).fetchall()
        return (model.model_validate_json(text) for (text,) in rows)
