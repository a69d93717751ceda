#!/usr/bin/env python3
"""What the bubblewrap sandbox costs an external agent: wall time per action, sandboxed vs not.

    python bench/sandbox.py [--n 20] [--history 400]

Runs examples/external_agent.py through ExternalAgent.act on one CallAPI task with a history of
--history turns, --n times under sandbox=none and --n times under sandbox=bwrap, interleaved (so
load on the machine hits both alike), and prints the median, min and max wall time of each and
the median difference. Seconds, not minutes: nothing to resume.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests.agents.helpers: the same task and history builder the tests use


async def main(n: int, history_turns: int) -> int:
    from iba.agents import sandbox
    from iba.agents.base import AgentEnv
    from iba.agents.external import ExternalAgent
    from tests.agents.helpers import API_TASK
    from tests.fakes import ScriptedBackend
    from tests.retrieval.helpers import make_history

    why = sandbox.unavailable()
    if why:
        print(f"no sandbox on this machine: {why}", file=sys.stderr)
        return 2
    history = make_history([("user" if i % 2 == 0 else "assistant",
                             f"message {i}: we talked about dinner plans, japanese food and how mild it should be")
                            for i in range(history_turns)])
    env = AgentEnv(backend=ScriptedBackend([]), cache_dir=Path("/tmp/iba-bench-sandbox"))
    cmd = f"python {ROOT / 'examples' / 'external_agent.py'}"
    agents = {mode: ExternalAgent(env, cmd=cmd, sandbox=mode) for mode in ("none", "bwrap")}
    times: dict[str, list[float]] = {mode: [] for mode in agents}
    t0 = time.perf_counter()
    for i in range(n):
        for mode, agent in agents.items():
            start = time.perf_counter()
            await agent.act(API_TASK, history)
            times[mode].append(time.perf_counter() - start)
        done = i + 1
        eta = (time.perf_counter() - t0) / done * (n - done)
        print(f"\r{done}/{n} pairs, ETA {eta:.0f}s", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    print(f"command: python bench/sandbox.py --n {n} --history {history_turns}")
    for mode, ts in times.items():
        print(f"sandbox={mode}: median {1000 * statistics.median(ts):.0f} ms per action "
              f"(min {1000 * min(ts):.0f}, max {1000 * max(ts):.0f}; n={len(ts)})")
    diff = [b - a for a, b in zip(times["none"], times["bwrap"])]
    print(f"bwrap - none: median {1000 * statistics.median(diff):+.0f} ms per action (paired)")
    return 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20, help="actions per mode (default 20)")
    ap.add_argument("--history", type=int, default=400, help="history turns in the request (default 400)")
    a = ap.parse_args()
    sys.exit(asyncio.run(main(a.n, a.history)))
