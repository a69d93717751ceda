"""Prompt-state reuse on the real embedded model (SmolLM2-135M: fast, quality does not matter).

Each test loads its own context (a distinct n_ctx), so the live state of other tests' calls
cannot leak into the counts.
"""

from __future__ import annotations

import numpy as np
import pytest

from iba.llm.llama_cpp import LlamaCppBackend
from iba.llm.prompt_states import PromptStates, common_prefix

pytestmark = pytest.mark.slow

SHARED = "Notes about the user. " + " ".join(f"Note {i}: the user picked option {i % 7} last time." for i in range(40))
ASK_A = [{"role": "user", "content": SHARED + "\nWhich option did the user pick in note 3?"}]
ASK_B = [{"role": "user", "content": SHARED + "\nWhich option did the user pick in note 12?"}]
OTHER = [{"role": "user", "content": "Write one line about the sea."}]


def _backend(n_ctx: int, mb: int) -> LlamaCppBackend:
    return LlamaCppBackend.from_spec("smollm2-135m", use_cache=False, n_ctx=n_ctx, prompt_state_mb=mb)


def test_common_prefix():
    a = np.array([1, 2, 3, 4], dtype=np.int32)
    assert common_prefix(a, np.array([1, 2, 9], dtype=np.int32)) == 2
    assert common_prefix(a, a[:2]) == 2 and common_prefix(a, a) == 4
    assert common_prefix(a, np.array([], dtype=np.int32)) == 0
    with pytest.raises(ValueError, match=">= 0"):
        PromptStates(-1)


async def test_an_interleaved_call_keeps_the_shared_prefix(smollm_gguf):
    be = _backend(3072, 256)
    shared = be.count_tokens(SHARED)
    first = await be.complete(ASK_A, max_tokens=6)
    await be.complete(OTHER, max_tokens=6)  # replaces the live context
    second = await be.complete(ASK_B, max_tokens=6)
    assert first.reused_prompt_tokens == 0  # a fresh context
    assert second.reused_prompt_tokens >= shared  # restored from the snapshot of the first call
    assert second.reused_prompt_tokens < second.prompt_tokens
    assert be._loaded.states.restores >= 1

    # the same answer as a context that evaluates the whole prompt (no snapshots, live state elsewhere)
    cold = _backend(3136, 0)
    await cold.complete(OTHER, max_tokens=6)
    again = await cold.complete(ASK_B, max_tokens=6)
    assert again.reused_prompt_tokens < shared / 4  # the chat template's opening (a default system prompt)
    assert again.text == second.text


async def test_the_live_context_is_reused_without_snapshots(smollm_gguf):
    be = _backend(3200, 0)
    await be.complete(ASK_A, max_tokens=6)
    follow = await be.complete(ASK_B, max_tokens=6)  # nothing in between: llama.cpp's own prefix match
    assert follow.reused_prompt_tokens >= be.count_tokens(SHARED)
    assert len(be._loaded.states) == 0


async def test_snapshots_stay_within_their_budget(smollm_gguf):
    be = _backend(3264, 2)  # 2 MB: about 90 tokens of SmolLM2's KV cache
    for i in range(4):
        await be.complete([{"role": "user", "content": f"{i}: " + SHARED[: 60 + 20 * i]}], max_tokens=4)
        states = be._loaded.states
        assert states.bytes <= states.budget
    big = [{"role": "user", "content": SHARED}]  # its state alone is over the budget: not kept
    await be.complete(big, max_tokens=4)
    assert all(len(s.tokens) < be.count_tokens(SHARED) for s in be._loaded.states._snaps.values())
