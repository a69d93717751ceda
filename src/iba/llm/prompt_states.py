"""Prompt-state reuse for the embedded backend: snapshots of a llama.cpp context's KV cache.

llama-cpp-python already skips the tokens a new prompt shares with the *live* context (the
previous call). That is lost as soon as calls interleave: an agent's next step after another
instance's call, a QA probe after its task, two agents on one model. `PromptStates` keeps the
last few contexts (their tokens and KV bytes, LRU within a byte budget); before a call it loads
the snapshot sharing the longest token prefix with the new prompt when that beats the live one,
so llama.cpp evaluates only the rest.

We snapshot the KV state (llama_state_get_data, ~28 KB per token on the 1.5B model) and not
`Llama.save_state()`, which also copies one float32 logits row per token (600 KB per token on
Qwen's 152k vocabulary) that a prefix restore never reads: the suffix evaluation refreshes them.

Greedy decoding over a reused prefix can differ in the last bits of the logits from a cold
evaluation (different batch splits), so rare ties may break differently; the response cache is
what makes a rerun reproduce a run exactly.
"""

from __future__ import annotations

import ctypes
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np

DEFAULT_BUDGET_MB = 1024


def common_prefix(a: np.ndarray, b: np.ndarray) -> int:
    """Length of the shared leading run of two token arrays."""
    n = min(len(a), len(b))
    if n == 0:
        return 0
    diff = np.flatnonzero(a[:n] != b[:n])
    return int(diff[0]) if len(diff) else n


@dataclass
class _Snapshot:
    tokens: np.ndarray  # int32 token ids the KV cells hold, in order
    data: Any  # ctypes byte array from llama_state_get_data
    size: int


class PromptStates:
    """Snapshots of one loaded model's context; every method runs on that model's worker thread."""

    def __init__(self, budget_mb: int = DEFAULT_BUDGET_MB) -> None:
        if budget_mb < 0:
            raise ValueError(f"prompt state budget must be >= 0 MB, got {budget_mb}")
        self.budget = budget_mb * 1024 * 1024
        self._snaps: OrderedDict[int, _Snapshot] = OrderedDict()
        self._next = 0
        self.bytes = 0
        self.restores = 0

    def __len__(self) -> int:
        return len(self._snaps)

    def prepare(self, llama: Any, prompt: list[int]) -> int:
        """Load the best snapshot for `prompt` if it beats the live context; returns the prompt
        tokens llama.cpp will not evaluate again (at most len(prompt) - 1: the last one is always
        evaluated to produce fresh logits)."""
        target = np.asarray(prompt, dtype=np.int32)
        live = common_prefix(np.asarray(llama.input_ids[: llama.n_tokens], dtype=np.int32), target)
        best_key, best = None, live
        for key, snap in self._snaps.items():
            n = common_prefix(snap.tokens, target)
            if n > best:
                best_key, best = key, n
        if best_key is not None:
            snap = self._snaps[best_key]
            self._snaps.move_to_end(best_key)
            self._load(llama, snap)
            self.restores += 1
        return min(best, max(0, len(prompt) - 1))

    def save(self, llama: Any) -> None:
        """Snapshot the live context (prompt + completion of the call that just ran)."""
        if self.budget == 0 or llama.n_tokens == 0:
            return
        tokens = np.asarray(llama.input_ids[: llama.n_tokens], dtype=np.int32).copy()
        for key, snap in list(self._snaps.items()):
            shared = common_prefix(snap.tokens, tokens)
            if shared == len(tokens):  # an existing snapshot already covers this context
                self._snaps.move_to_end(key)
                return
            if shared == len(snap.tokens):  # the new one extends it: it is worth at least as much
                self._drop(key)
        import llama_cpp

        ctx = llama._ctx.ctx
        size = int(llama_cpp.llama_state_get_size(ctx))
        if size > self.budget:
            return
        data = (ctypes.c_uint8 * size)()
        written = int(llama_cpp.llama_state_get_data(ctx, data, size))
        while self._snaps and self.bytes + written > self.budget:
            self._drop(next(iter(self._snaps)))
        self._snaps[self._next] = _Snapshot(tokens=tokens, data=data, size=written)
        self._next += 1
        self.bytes += written

    def clear(self) -> None:
        self._snaps.clear()
        self.bytes = 0

    def _drop(self, key: int) -> None:
        self.bytes -= self._snaps.pop(key).size

    @staticmethod
    def _load(llama: Any, snap: _Snapshot) -> None:
        import llama_cpp

        if int(llama_cpp.llama_state_set_data(llama._ctx.ctx, snap.data, snap.size)) != snap.size:
            raise RuntimeError("llama.cpp refused a saved prompt state")
        n = len(snap.tokens)
        llama.input_ids[:n] = snap.tokens
        llama.n_tokens = n
        # the logits of the restored context are not valid: make generate() evaluate the suffix
        llama._requires_eval = True
