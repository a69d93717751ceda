"""iba.cancel: a timed-out action's blocking work really stops (embedding, llama.cpp decoding)."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from iba import cancel
from iba.agents.base import Agent, AgentEnv
from iba.run.runner import RunConfig, run_one
from iba.types import Action, TaskView, Turn


def test_scope_is_per_context_and_check_raises_once_set():
    assert cancel.current() is None
    cancel.check()  # no scope: nothing to stop
    with cancel.scope() as ev:
        assert cancel.current() is ev
        seen: list[threading.Event | None] = []

        async def in_thread() -> None:  # asyncio.to_thread copies the context into the thread
            seen.append(await asyncio.to_thread(cancel.current))

        asyncio.run(in_thread())
        assert seen == [ev]
        cancel.check()
        ev.set()
        with pytest.raises(cancel.Cancelled):
            cancel.check()
    assert cancel.current() is None


TASK = TaskView(instance_id="i0", user_id="u0", domain="daily", scenario="s", scenario_name="S",
                query="Plan my evening.", action="generate", now="2025-02-01T09:00:00")


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["onnx", "numpy"])
def test_timeout_stops_the_history_embedding(tmp_path, engine):
    """rag on a long history with a 1 s timeout: the record is errored and the embedding stops at
    its next batch instead of embedding the whole history in the background. numpy runs its batches
    in pool threads (two here), which must see the action's cancel scope too."""
    from iba.agents.rag import RagAgent
    from iba.retrieval import embed, onnx_bert
    from iba.retrieval.minilm import MiniLMEmbedder

    if engine == "onnx" and not onnx_bert.available():
        pytest.skip(f"onnx engine not installed: {onnx_bert.INSTALL}")
    emb = MiniLMEmbedder(engine=engine, threads=2)
    name = f"minilm-cancel-{engine}"
    key = (name, repr([]))  # get_embedder's cache key for a plain name (no settings)
    embed._CACHE[key] = emb  # what get_embedder(name) returns to the agent
    batches = {"n": 0}
    real = emb._pooled

    def counting(ids, mask):
        batches["n"] += 1
        return real(ids, mask)

    emb._pooled = counting
    try:
        history = [Turn(id=f"u0-t{i}", session_id=f"u0-s{i // 10}", timestamp=f"2025-01-01T{i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}",
                        role="user", text=f"note {i}: " + " ".join(f"word{(i * 7 + j) % 997}" for j in range(60)))
                   for i in range(4000)]
        agent = RagAgent(AgentEnv(backend=None, cache_dir=tmp_path / "cache", embedder=name))  # type: ignore[arg-type]
        # chunking 4,000 turns takes about a second, then ~35 batches follow: 2.5 s usually lands
        # among the batches (and if it lands before them, none may start after it either)
        cfg = RunConfig(agents=["rag"], timeout_s=2.5, progress=False)
        rec = asyncio.run(run_one(agent, "rag", TASK, history, dataset="d", model="m", trial=0, cfg=cfg))
        assert rec.status == "errored" and "TimeoutError" in (rec.error or "")
        at_timeout = batches["n"]
        time.sleep(3.0)  # a batch of 32 windows takes well under a second here
        # numpy: at most one batch per pool thread was already running
        assert batches["n"] - at_timeout <= 2, f"embedding went on after the timeout: {at_timeout} -> {batches['n']} batches"
        assert not (tmp_path / "cache" / "index").exists() or not list((tmp_path / "cache" / "index").glob("*.npz"))
    finally:
        embed._CACHE.pop(key, None)


class _Talker(Agent):
    name = "talker"

    async def act(self, task: TaskView, history: list[Turn]) -> Action:
        # a prompt the 135M model does not end early: "count to 5000" stopped at 121 tokens (1 s on a fast
        # box, so the 1 s timeout could miss it); this one runs to max_tokens (~60 s for 4000 on 2 cores)
        prompt = "Repeat the word 'apple' 3000 times, separated by spaces."
        c = await self.env.backend.complete([{"role": "user", "content": prompt}], max_tokens=4000)
        return Action(kind="generate", text=c.text)


@pytest.mark.slow
def test_timeout_stops_llama_decoding(smollm_backend):
    """A generation of up to 4000 tokens, timed out after 1 s: the model is free again within a
    few tokens' time, not after the whole completion (or the call's own 600 s deadline)."""
    async def main() -> tuple[str, float]:
        await smollm_backend.complete([{"role": "user", "content": "hi"}], max_tokens=1)  # load the model first
        cfg = RunConfig(agents=["talker"], timeout_s=1.0, progress=False)
        rec = await run_one(_Talker(AgentEnv(backend=smollm_backend)), "talker", TASK, [], dataset="d", model="m",
                            trial=0, cfg=cfg)
        t0 = time.monotonic()
        await smollm_backend.complete([{"role": "user", "content": "ok"}], max_tokens=1)
        return rec.status, time.monotonic() - t0

    status, wait = asyncio.run(main())
    assert status == "errored", "the generation ended within the 1 s timeout: the prompt no longer makes it long"
    # decoding 4000 tokens takes tens of seconds on 2 cores; a stopped one frees the model at once
    assert wait < 10.0, f"the next call waited {wait:.1f}s for the cancelled generation"
