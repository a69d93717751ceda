"""The queries every table of a result store (run/store.py) is read with, on the connection and
lock the Store holds: one row, all rows, a record by key, the records oldest first."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from typing import Any, TypeVar

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)


class StoreTables:
    _db: sqlite3.Connection
    _lock: threading.Lock

    def _create(self, schema: str) -> None:
        with self._lock:
            self._db.executescript(schema)

    def _one(self, sql: str, *args: Any) -> Any:
        with self._lock:
            return self._db.execute(sql, args).fetchone()

    def _all(self, sql: str, *args: Any) -> list[Any]:
        with self._lock:
            return self._db.execute(sql, args).fetchall()

    def _write(self, sql: str, *args: Any) -> int:
        """One statement in its own transaction; returns the number of rows it changed."""
        with self._lock, self._db:
            return self._db.execute(sql, args).rowcount

    def _record(self, model: type[M], table: str, where: str, *args: Any) -> M | None:
        row = self._one(f"SELECT record FROM {table} WHERE {where}", *args)
        return model.model_validate_json(row[0]) if row else None

    def _records(self, model: type[M], table: str, column: str | None = None, value: object = None) -> Iterator[M]:
        """`table`'s records (those whose `column` is `value` if given), oldest first, parsed lazily."""
        where, args = (f" WHERE {column}=?", (value,)) if column and value is not None else ("", ())
        rows = self._all(f"SELECT record FROM {table}{where} ORDER BY rowid", *args)
        return (model.model_validate_json(text) for (text,) in rows)
