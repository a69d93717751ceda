"""A searchable index of one user's history, cached on disk by content so it is embedded once.

The cache key is the hash of (history content, embedder name, chunking unit/size/overlap): the same
history reached from another task, agent or run finds the file and embeds nothing. Turn units also
go through a text-keyed vector cache (text_vectors.py), so a message another history already had
is not embedded again. Files are
written to a temp name and renamed into place (atomic on POSIX), and builders of one key take an
exclusive lock file, so concurrent processes neither corrupt an entry nor embed it twice. An
in-process LRU on top keeps loaded indexes for the agents of one run.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from iba.atomic import atomic_file
from iba.retrieval.bm25 import BM25Index, top_k
from iba.retrieval.chunking import CHUNK_OVERLAP, CHUNK_TOKENS, make_units, turn_body, user_turn_units
from iba.retrieval.embed import Embedder, get_embedder
from iba.retrieval.hybrid import rrf
from iba.retrieval.passage import Chunk, Method, Passage, Unit
from iba.retrieval.text_vectors import TextVectors
from iba.retrieval.vector import VectorIndex, one_blas_thread
from iba.types import Turn, stable_hash

T = TypeVar("T")
FORMAT = 1  # bump when the file layout or chunk rendering changes
LRU_SIZE = 64
QUERY_MEMO = 2048  # query vectors kept per index before the memo is cleared
HYBRID_DEPTH = 50  # candidates per ranking fed to reciprocal rank fusion

_lru: OrderedDict[str, HistoryIndex] = OrderedDict()
_lru_lock = threading.Lock()
KEY_MEMO = 16  # histories whose cache keys are remembered (history_key)
_key_memo: OrderedDict[tuple, tuple[str, list[Turn]]] = OrderedDict()


def history_key(history: Sequence[Turn], embedder_name: str, unit: Unit, size: int, overlap: int) -> str:
    """The index cache's key. Hashing a 5,000-turn history's text costs ~10 ms, which every agent step of
    every task would pay again, so keys are remembered per sequence of Turn objects: parsed turns are
    shared and read-only (Dataset.history), and the memo holds them, so their ids stay theirs."""
    memo_key = (tuple(map(id, history)), embedder_name, unit, size, overlap)
    with _lru_lock:
        hit = _key_memo.get(memo_key)
        if hit is not None:
            _key_memo.move_to_end(memo_key)
            return hit[0]
    key = _content_key(history, embedder_name, unit, size, overlap)
    with _lru_lock:
        _key_memo[memo_key] = (key, list(history))
        while len(_key_memo) > KEY_MEMO:
            _key_memo.popitem(last=False)
    return key


def _content_key(history: Sequence[Turn], embedder_name: str, unit: Unit, size: int, overlap: int) -> str:
    content = [[t.id, t.session_id, t.timestamp, t.role, t.text] for t in history]
    key = {"format": FORMAT, "history": content, "embedder": embedder_name, "unit": unit, "size": size, "overlap": overlap}
    if unit in ("turn", "mixed"):
        key["embeds"] = "turn_body"  # turn units embed the turn without its date since this was added
    return stable_hash(key, n=24)


class HistoryIndex:
    """Chunks of one history with their vectors; dense, BM25 and hybrid search."""

    def __init__(self, key: str, chunks: list[Chunk], vectors: np.ndarray, embedder: Embedder) -> None:
        if len(chunks) != len(vectors):
            raise ValueError(f"{len(chunks)} chunks but {len(vectors)} vectors")
        self.key = key
        self.chunks = chunks
        self.embedder = embedder
        self.vectors = VectorIndex(vectors)
        # views derived from the chunks (BM25, Deep Retrieval's cue-bearing chunks...): see derived()
        self.memo: dict[str, Any] = {}
        self._derive_lock = threading.RLock()
        self._query_vectors: dict[str, np.ndarray] = {}

    def derived(self, name: str, build: Callable[[], T]) -> T:
        """memo[name], built once per loaded index. One user's tasks run at once ask for the same view
        together: without the lock each built its own (at --concurrency 32, a user's BM25 index up to 18
        times over; bench/BENCHMARKS.md, issue 33)."""
        found = self.memo.get(name)
        if found is None:
            with self._derive_lock:
                found = self.memo.get(name)
                if found is None:
                    found = self.memo[name] = build()
        return found

    # ------------------------------------------------------------------ building and caching

    @classmethod
    def build(
        cls,
        history: Sequence[Turn],
        embedder: Embedder | str = "minilm",
        cache_dir: str | Path | None = None,
        unit: Unit = "token",
        size: int = CHUNK_TOKENS,
        overlap: int = CHUNK_OVERLAP,
    ) -> HistoryIndex:
        """The index of `history`: from the in-process LRU, else the disk cache, else embedded now."""
        emb = get_embedder(embedder) if isinstance(embedder, str) else embedder
        key = history_key(history, emb.name, unit, size, overlap)
        hit = _lru_get(key)
        if hit is not None:
            return hit
        if cache_dir is None:
            return _lru_put(key, cls._embed(key, history, emb, unit, size, overlap))
        path = index_path(cache_dir, key)
        with _file_lock(path.with_suffix(".lock")):
            hit = _lru_get(key)  # another thread may have finished while we waited
            if hit is not None:
                return hit
            index = cls._load(path, key, emb)
            if index is None:
                index = cls._embed(key, history, emb, unit, size, overlap, cache_dir)
                index._save(path)
            return _lru_put(key, index)

    @classmethod
    def ensure_cached(
        cls,
        history: Sequence[Turn],
        embedder: Embedder | str = "minilm",
        cache_dir: str | Path = ".iba-cache",
        unit: Unit = "token",
        size: int = CHUNK_TOKENS,
        overlap: int = CHUNK_OVERLAP,
    ) -> tuple[str, int | None]:
        """Put the index of `history` in the disk cache, as `build` would (same key, file and lock),
        without keeping it in memory (`iba index` builds many); (key, chunks embedded now), or
        (key, None) when a readable entry was there already."""
        emb = get_embedder(embedder) if isinstance(embedder, str) else embedder
        key = history_key(history, emb.name, unit, size, overlap)
        path = index_path(cache_dir, key)
        with _file_lock(path.with_suffix(".lock")):
            if cls._load(path, key, emb) is not None:
                return key, None
            index = cls._embed(key, history, emb, unit, size, overlap, cache_dir)
            index._save(path)
            return key, len(index)

    @classmethod
    def _embed(
        cls, key: str, history: Sequence[Turn], emb: Embedder, unit: Unit, size: int, overlap: int,
        cache_dir: str | Path | None = None,
    ) -> HistoryIndex:
        if unit == "mixed":
            # the windows' vectors are the token index's (cached under its own key), the user
            # turns' come from the text-keyed store like turn units
            windows = cls.build(history, emb, cache_dir, "token", size, overlap)
            turns = [t for t in history if t.role == "user"]
            vectors = np.concatenate([windows.vectors.vectors, _turn_vectors(turns, emb, cache_dir)])
            return cls(key, windows.chunks + user_turn_units(history), vectors, emb)
        chunks = make_units(history, unit, emb.token_spans, size, overlap)
        if unit != "turn":
            # windows and sessions cross turn boundaries, so they almost never recur: embedded as is
            return cls(key, chunks, emb.encode([c.text for c in chunks]), emb)
        return cls(key, chunks, _turn_vectors(history, emb, cache_dir), emb)

    @classmethod
    def _load(cls, path: Path, key: str, emb: Embedder) -> HistoryIndex | None:
        if not path.is_file():
            return None
        try:
            with np.load(path, allow_pickle=False) as data:
                vectors = data["vectors"]
                chunks = [Chunk.model_validate(c) for c in json.loads(str(data["chunks"]))]
            return cls(key, chunks, vectors, emb)
        except Exception:  # an unreadable entry (e.g. written by an older version) is rebuilt
            return None

    def _save(self, path: Path) -> None:
        chunks_json = json.dumps([c.model_dump() for c in self.chunks], ensure_ascii=False)
        with atomic_file(path, "wb", prefix=path.stem, fsync=True) as f:
            np.savez(f, vectors=self.vectors.vectors, chunks=np.array(chunks_json))

    # ------------------------------------------------------------------ search

    def __len__(self) -> int:
        return len(self.chunks)

    @property
    def bm25(self) -> BM25Index:
        return self.derived("bm25", lambda: BM25Index([c.text for c in self.chunks]))

    def passage(self, i: int, score: float, query: str | None = None) -> Passage:
        c = self.chunks[i]
        return Passage(chunk_id=c.id, text=c.text, turn_ids=c.turn_ids, timestamps=c.timestamps, score=score, query=query)

    def dense_scores(self, queries: Sequence[str]) -> np.ndarray:
        """(len(queries), len(chunks)) cosine similarities; new queries are embedded in one batch.

        Query vectors are kept per index: Deep Retrieval searches the same task and facet queries
        again (cue scan, feedback), and an agent's several steps share this index."""
        new = list(dict.fromkeys(q for q in queries if q not in self._query_vectors))
        if new:
            if len(self._query_vectors) + len(new) > QUERY_MEMO:
                self._query_vectors.clear()
            self._query_vectors.update(zip(new, self.embedder.encode(new)))
        qv = np.stack([self._query_vectors[q] for q in queries]) if queries else self.embedder.encode([])
        if not len(self.chunks):
            return np.zeros((len(queries), 0), dtype=np.float32)
        with one_blas_thread():
            return qv @ self.vectors.vectors.T

    def search(self, query: str, k: int = 3, method: Method = "dense") -> list[Passage]:
        return self.search_many([query], k, method)[0]

    def search_many(self, queries: Sequence[str], k: int = 3, method: Method = "dense") -> list[list[Passage]]:
        """Top-k passages per query, best first."""
        if method not in ("dense", "bm25", "hybrid"):
            raise ValueError(f"unknown search method {method!r}; choose dense, bm25 or hybrid")
        results: list[list[Passage]] = []
        dense = self.dense_scores(queries) if method in ("dense", "hybrid") else None
        for qi, q in enumerate(queries):
            if method == "dense":
                hits = _top(dense[qi], k)
            elif method == "bm25":
                hits = self.bm25.search(q, k)
            else:
                depth = max(HYBRID_DEPTH, k)
                fused = rrf([[i for i, _ in _top(dense[qi], depth)], [i for i, _ in self.bm25.search(q, depth)]])
                hits = [(int(i), s) for i, s in fused[:k]]
            results.append([self.passage(i, s, q) for i, s in hits])
        return results


def _turn_vectors(turns: Sequence[Turn], emb: Embedder, cache_dir: str | Path | None) -> np.ndarray:
    """One vector per turn, of its body (no date), through the text-keyed store when there is a cache."""
    texts = [turn_body(t) for t in turns]
    if cache_dir is None:
        return emb.encode(texts)
    with contextlib.closing(TextVectors(cache_dir, emb)) as store:
        return store.encode(texts)


def index_path(cache_dir: str | Path, key: str) -> Path:
    return Path(cache_dir) / "index" / f"{key}.npz"


def _lru_get(key: str) -> HistoryIndex | None:
    with _lru_lock:
        hit = _lru.get(key)
        if hit is not None:
            _lru.move_to_end(key)
        return hit


def _lru_put(key: str, index: HistoryIndex) -> HistoryIndex:
    with _lru_lock:
        _lru[key] = index
        _lru.move_to_end(key)
        while len(_lru) > LRU_SIZE:
            _lru.popitem(last=False)
    return index


def _top(scores: np.ndarray, k: int) -> list[tuple[int, float]]:
    return [(i, float(scores[i])) for i in top_k(scores, k)]


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """An exclusive lock across processes and threads (flock on a fresh descriptor); no-op off POSIX."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: atomic renames alone keep entries whole
        yield
        return
    with open(path, "a+b") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def clear_memory_cache() -> None:
    with _lru_lock:
        _lru.clear()
        _key_memo.clear()
