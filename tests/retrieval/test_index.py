import multiprocessing as mp
import threading

import numpy as np
import pytest

from iba.retrieval import index as index_mod
from iba.retrieval.index import HistoryIndex, clear_memory_cache, history_key
from tests.retrieval.helpers import HashEmbedder, make_history

TEXTS = [
    ("user", "Please keep my reports short, bullet points only."),
    ("assistant", "Sure, here is a short report."),
    ("user", "I hate spicy food, no chili at all!"),
    ("assistant", "Noted, nothing spicy."),
    ("user", "What's the weather in Paris?"),
    ("assistant", "Mild and sunny."),
    ("user", "Actually, make the report longer with full paragraphs."),
    ("assistant", "Here is a longer version."),
] * 5


@pytest.fixture(autouse=True)
def _fresh_lru():
    clear_memory_cache()
    yield
    clear_memory_cache()


def test_second_build_embeds_nothing(tmp_path):
    history = make_history(TEXTS)
    emb = HashEmbedder()
    first = HistoryIndex.build(history, emb, tmp_path, unit="token", size=64, overlap=10)
    assert emb.encode_calls == 1 and emb.encoded_texts == len(first)
    clear_memory_cache()  # a new run/process: only the disk cache is left
    emb2 = HashEmbedder()
    second = HistoryIndex.build(history, emb2, tmp_path, unit="token", size=64, overlap=10)
    assert emb2.encode_calls == 0
    assert [c.model_dump() for c in second.chunks] == [c.model_dump() for c in first.chunks]
    assert np.array_equal(second.vectors.vectors, first.vectors.vectors)
    # in-process: the very same object, no disk read
    assert HistoryIndex.build(history, emb2, tmp_path, unit="token", size=64, overlap=10) is second
    assert len(list((tmp_path / "index").glob("*.npz"))) == 1


def test_key_depends_on_content_embedder_and_chunking(tmp_path):
    h = make_history(TEXTS)
    k = history_key(h, "minilm", "token", 256, 50)
    assert k == history_key(make_history(TEXTS), "minilm", "token", 256, 50)
    assert k != history_key(h, "other", "token", 256, 50)
    assert k != history_key(h, "minilm", "turn", 256, 50)
    assert k != history_key(h, "minilm", "token", 128, 50)
    edited = list(h)
    edited[3] = edited[3].model_copy(update={"text": "changed"})
    assert k != history_key(edited, "minilm", "token", 256, 50)


def test_remembered_keys_are_the_content_keys():
    """Keys are remembered per sequence of turn objects (a copy of the list shares them): the same key
    as hashing the content, and an edited turn (a new object) is hashed again."""
    from iba.retrieval import index as index_mod

    clear_memory_cache()
    h = make_history(TEXTS)
    k = history_key(h, "minilm", "token", 256, 50)
    assert history_key(list(h), "minilm", "token", 256, 50) == k == index_mod._content_key(h, "minilm", "token", 256, 50)
    assert len(index_mod._key_memo) == 1  # the copy was a memo hit
    edited = list(h)
    edited[3] = edited[3].model_copy(update={"text": "changed"})
    assert history_key(edited, "minilm", "token", 256, 50) == index_mod._content_key(edited, "minilm", "token", 256, 50) != k
    assert history_key(h[:-1], "minilm", "token", 256, 50) != k


def test_corrupt_entry_is_rebuilt(tmp_path):
    history = make_history(TEXTS)
    emb = HashEmbedder()
    idx = HistoryIndex.build(history, emb, tmp_path)
    path = tmp_path / "index" / f"{idx.key}.npz"
    path.write_bytes(b"not a zip file")
    clear_memory_cache()
    again = HistoryIndex.build(history, emb, tmp_path)
    assert emb.encode_calls == 2 and len(again) == len(idx)
    assert np.load(path)["vectors"].shape[0] == len(idx)


def _build_in_process(args):
    cache, n = args
    from iba.retrieval.index import HistoryIndex
    from tests.retrieval.helpers import HashEmbedder, make_history

    emb = HashEmbedder()
    idx = HistoryIndex.build(make_history(TEXTS * n), emb, cache, unit="turn")
    return idx.key, len(idx), emb.encode_calls


def test_concurrent_processes_do_not_corrupt_or_duplicate(tmp_path):
    ctx = mp.get_context("spawn")
    with ctx.Pool(4) as pool:
        results = pool.map(_build_in_process, [(str(tmp_path), 3)] * 6)
    keys = {r[0] for r in results}
    assert len(keys) == 1 and {r[1] for r in results} == {len(TEXTS) * 3}
    assert sum(r[2] for r in results) == 1  # the lock let exactly one process embed
    files = list((tmp_path / "index").glob("*"))
    assert [f.suffix for f in files if f.suffix not in (".lock",)] == [".npz"]  # no temp files left
    clear_memory_cache()
    assert len(HistoryIndex.build(make_history(TEXTS * 3), HashEmbedder(), tmp_path, unit="turn")) == len(TEXTS) * 3


def test_concurrent_threads_share_one_build(tmp_path):
    emb = HashEmbedder()
    history = make_history(TEXTS)
    out = []
    threads = [threading.Thread(target=lambda: out.append(HistoryIndex.build(history, emb, tmp_path))) for _ in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert emb.encode_calls == 1 and len({id(i) for i in out}) == 1  # built once, shared


def test_search_methods_return_passages(tmp_path):
    idx = HistoryIndex.build(make_history(TEXTS), HashEmbedder(), tmp_path, unit="turn")
    for method in ("dense", "bm25", "hybrid"):
        hits = idx.search("spicy chili food", k=3, method=method)
        assert 1 <= len(hits) <= 3
        assert "chili" in hits[0].text, (method, hits[0].text)
        assert hits[0].turn_ids and hits[0].timestamps and hits[0].query == "spicy chili food"
    with pytest.raises(ValueError, match="unknown search method"):
        idx.search("x", method="magic")  # type: ignore[arg-type]


def test_lru_is_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(index_mod, "LRU_SIZE", 2)
    emb = HashEmbedder()
    for n in range(1, 5):
        HistoryIndex.build(make_history(TEXTS[: 2 * n]), emb, None, unit="turn")
    assert len(index_mod._lru) == 2


def test_turn_units_share_vectors_by_text_across_histories_and_dates(tmp_path):
    """A message another history already had (on another day, under another id) is not embedded
    again; each distinct text is embedded once even within one history."""
    from iba.retrieval.chunking import turn_body

    a = make_history(TEXTS, user="ua")
    emb = HashEmbedder()
    first = HistoryIndex.build(a, emb, tmp_path, unit="turn")
    assert emb.encoded_texts == len(set(TEXTS))  # 8 distinct of 40 turns
    shifted = [("user", "A new message about trains.")] + TEXTS  # every turn moves: new dates, new ids
    b = make_history(shifted, user="ub", per_session=3)
    emb2 = HashEmbedder()
    second = HistoryIndex.build(b, emb2, tmp_path, unit="turn")
    assert emb2.encoded_texts == 1  # only the new message
    assert second.chunks[1].text.startswith("[2025-")  # the shown text keeps its date
    want = HashEmbedder().encode([turn_body(t) for t in b])
    assert np.allclose(second.vectors.vectors, want)
    assert np.allclose(first.vectors.vectors, HashEmbedder().encode([turn_body(t) for t in a]))


def test_mixed_units_are_the_windows_plus_the_user_turns(tmp_path):
    """unit=mixed reuses the token index's window vectors and the turn store's vectors: building
    it after both embeds nothing, and its user-turn units are the turn index's user rows."""
    h = make_history(TEXTS)
    emb = HashEmbedder()
    windows = HistoryIndex.build(h, emb, tmp_path, unit="token", size=64, overlap=10)
    turns = HistoryIndex.build(h, emb, tmp_path, unit="turn")
    before = emb.encoded_texts
    mixed = HistoryIndex.build(h, emb, tmp_path, unit="mixed", size=64, overlap=10)
    assert emb.encoded_texts == before
    users = [i for i, t in enumerate(h) if t.role == "user"]
    assert len(mixed) == len(windows) + len(users)
    assert [c.text for c in mixed.chunks[: len(windows)]] == [c.text for c in windows.chunks]
    assert [c.turn_ids for c in mixed.chunks[len(windows):]] == [[h[i].id] for i in users]
    assert len({c.id for c in mixed.chunks}) == len(mixed)  # window and turn ids do not collide
    assert np.allclose(mixed.vectors.vectors[len(windows):], turns.vectors.vectors[users])
    assert mixed.key not in (windows.key, turns.key)
    hits = mixed.search(h[users[0]].text, 3, "dense")
    assert hits[0].chunk_id.startswith("u") and hits[0].turn_ids == [h[users[0]].id]


def test_a_derived_view_is_built_once_when_asked_at_once(tmp_path):
    """One user's tasks run at once ask for its BM25 index (and Deep Retrieval's views) together."""
    import time

    index = HistoryIndex.build(make_history(TEXTS), HashEmbedder(), tmp_path, unit="token", size=64, overlap=10)
    built = []
    start = threading.Barrier(8)

    def build():
        built.append(1)
        time.sleep(0.05)  # long enough that, unlocked, every thread would be building at once
        return object()

    def ask():
        start.wait()
        index.derived("view", build)

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(built) == 1 and index.derived("view", build) is index.memo["view"]
    assert index.bm25 is index.bm25
