"""On-disk response cache: SQLite in WAL mode, safe for several processes sharing one cache dir.

The key is the sha256 of everything that decides the reply: the model identity, the messages and
every generation parameter (max_tokens, temperature, seed, json_schema, tools, tool_choice, stop).
Only successful completions are stored; errors never are. A request that is meant to be random
(temperature > 0 and no seed) is not cached, so repeated trials really differ. What is stored is
scrubbed of the configured secrets first (llm.secrets): a reply that echoes a key is kept without it.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from iba.llm.base import Completion, ModelRequest
from iba.llm.secrets import redact_stored
from iba.sqlite_wal import enable_wal

# Bump when the meaning of a cached reply changes (e.g. how tool calls are produced).
KEY_VERSION = "iba-llm-cache/1"


def cache_key(model_identity: str, messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
    payload = {"v": KEY_VERSION, "model": model_identity, "messages": messages, "params": params}
    data = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(data.encode("utf-8")).hexdigest()


def cacheable(params: dict[str, Any]) -> bool:
    return not (float(params.get("temperature") or 0.0) > 0.0 and params.get("seed") is None)


class ResponseCache:
    """get/put of Completions by key. Blocking calls; use aget/aput from async code."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        # One connection per cache object, used from worker threads under a lock.
        self._conn = sqlite3.connect(self.path, timeout=30.0, check_same_thread=False, isolation_level=None)
        enable_wal(self._conn)
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute("PRAGMA busy_timeout=30000")
        self._conn.execute(
            "CREATE TABLE IF NOT EXISTS responses ("
            " key TEXT PRIMARY KEY, model TEXT NOT NULL, completion TEXT NOT NULL, created REAL NOT NULL)"
        )

    def get(self, key: str) -> Completion | None:
        with self._lock:
            row = self._conn.execute("SELECT completion FROM responses WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        try:
            comp = Completion.model_validate_json(row[0])
        except ValueError:
            return None  # written by an incompatible version: treat as a miss
        return comp.model_copy(update={"cached": True})

    def put(self, key: str, model: str, completion: Completion) -> None:
        data = redact_stored(completion.model_copy(update={"cached": False}).model_dump_json())
        with self._lock:
            # OR IGNORE: two processes racing on the same request keep the first answer.
            self._conn.execute(
                "INSERT OR IGNORE INTO responses (key, model, completion, created) VALUES (?, ?, ?, ?)",
                (key, redact_stored(model), data, time.time()),
            )

    def __len__(self) -> int:
        with self._lock:
            return self._conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0]

    async def aget(self, key: str) -> Completion | None:
        return await asyncio.to_thread(self.get, key)

    async def aput(self, key: str, model: str, completion: Completion) -> None:
        await asyncio.to_thread(self.put, key, model, completion)

    def close(self) -> None:
        with self._lock:
            self._conn.close()


_OPEN: dict[Path, ResponseCache] = {}
_OPEN_LOCK = threading.Lock()


def open_cache(cache_dir: str | Path) -> ResponseCache:
    """The cache in `cache_dir` (llm-responses.sqlite), one object per file per process."""
    path = (Path(cache_dir).expanduser() / "llm-responses.sqlite").resolve()
    with _OPEN_LOCK:
        if path not in _OPEN:
            _OPEN[path] = ResponseCache(path)
        return _OPEN[path]


async def through_cache(
    cache: ResponseCache | None,
    identity: str,
    model_id: str,
    request: ModelRequest,
    produce: Any,  # async () -> Completion
) -> Completion:
    """Return the cached reply for this request, or produce, store and return a fresh one.

    `identity` (hashed into the key) pins what model answered: the model string plus a file
    hash for local models; for servers the served model name alone, so replicas behind several
    endpoints share answers. `model_id` is the readable label stored beside the reply.
    """
    params = request.cache_params()
    if cache is None or not cacheable(params):
        return await produce()
    key = cache_key(identity, request.messages, params)
    hit = await cache.aget(key)
    if hit is not None:
        return hit
    comp = await produce()  # raises on error, so errors are never stored
    await cache.aput(key, model_id, comp)
    return comp
