"""Measure a backend's prompt-eval and generation speed: `python -m iba.llm.speed [--model M]`.

Prompt eval: a fresh ~N-token prompt (a nonce defeats llama.cpp's prefix reuse) with max_tokens=1.
Generation: the same prompt again (now reused) asking for a long answer; tokens / wall time.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
import uuid

from iba.llm import DEFAULT_MODEL, resolve_backend

_FILLER = (
    "The user prefers concise answers, dislikes spicy food, writes documentation in Markdown with "
    "numbered steps, and recently switched from morning to evening workouts. "
)


async def measure(model: str, prompt_tokens: int, gen_tokens: int, n_threads: int | None) -> dict[str, float]:
    be = resolve_backend(model, use_cache=False, n_threads=n_threads, timeout=600)
    await be.complete([{"role": "user", "content": "hi"}], max_tokens=1)  # load + warm up
    reps = max(1, prompt_tokens // max(1, be.count_tokens(_FILLER)))
    msgs = [
        {"role": "system", "content": f"Session {uuid.uuid4()}."},
        {"role": "user", "content": _FILLER * reps + "\nWrite a long, detailed story about this user."},
    ]
    t0 = time.perf_counter()
    first = await be.complete(msgs, max_tokens=1)
    t_prompt = time.perf_counter() - t0
    t0 = time.perf_counter()
    gen = await be.complete(msgs, max_tokens=gen_tokens)
    t_gen = time.perf_counter() - t0
    return {
        "prompt_tokens": first.prompt_tokens,
        "prompt_tok_per_s": first.prompt_tokens / t_prompt,
        "gen_tokens": gen.completion_tokens,
        "gen_tok_per_s": gen.completion_tokens / t_gen,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--prompt-tokens", type=int, default=1000)
    ap.add_argument("--gen-tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=None, help="llama.cpp threads (default: all CPUs we may use)")
    args = ap.parse_args(argv)
    r = asyncio.run(measure(args.model, args.prompt_tokens, args.gen_tokens, args.threads))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"{args.model}: prompt eval {r['prompt_tok_per_s']:.0f} tok/s ({r['prompt_tokens']} tokens), "
        f"generation {r['gen_tok_per_s']:.1f} tok/s ({r['gen_tokens']} tokens); "
        f"threads={args.threads or 'default'}, cpus={os.cpu_count()}, load1={load:.1f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
