"""The reference rows beside rag: null -> rag -> oracle on the demo build, and what `direct` (the
full-context row) keeps of a full build's histories.

  python bench/references.py                                  # both parts, the figures in BENCHMARKS.md
  python bench/references.py --skip-run --full runs/iba-full  # only the model-free part

Part 1 runs `iba run` on the demo build (built with seed 42 into OUT/demo-ds when missing) with the
agents (default null, rag, oracle) on the embedded model, judged by the same model, response cache
off, into OUT/refs.sqlite (resumable; a fresh OUT reruns everything), then `iba report`; it prints
Table 4, the references table and the wall and CPU time of the run (children's user+sys).

Part 2 (with --full DIR, a `--preset full` build) needs only the model's tokenizer: for --users
seeded personas and one of their tasks each, the history's turns and tokens, and how many of the
most recent turns the direct agent's prompt keeps at the model's context window (its own
truncation, DirectAgent.history_lines).
"""

from __future__ import annotations

import argparse
import random
import resource
import shlex
import subprocess
import sys
import time
from pathlib import Path


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=Path("runs/bench-references"), help="default: runs/bench-references")
    p.add_argument("--dataset", type=Path, default=None, help="dataset to run on (default: OUT/demo-ds, the demo build)")
    p.add_argument("--model", default="local:qwen2.5-coder-0.5b", help="agent and judge model (default: the 0.5B)")
    p.add_argument("--agent", action="append", dest="agents", metavar="SPEC", help="default: null, rag, oracle")
    p.add_argument("--skip-run", action="store_true", help="only part 2")
    p.add_argument("--full", type=Path, default=None, help="a --preset full build for part 2")
    p.add_argument("--users", type=int, default=8, help="part 2: personas (default 8)")
    p.add_argument("--seed", type=int, default=0, help="part 2: persona seed (default 0)")
    a = p.parse_args(argv)
    a.agents = a.agents or ["null", "rag", "oracle"]
    return a


def iba(*args: str) -> None:
    cmd = [sys.executable, "-m", "iba.cli", *args]
    print("$ " + shlex.join(["iba", *args]), flush=True)
    subprocess.run(cmd, check=False)


def run_part(a: argparse.Namespace) -> None:
    ds = a.dataset or a.out / "demo-ds"
    if not (ds / "manifest.json").exists():
        iba("build", "--preset", "demo", "--seed", "42", "--out", str(ds))
    store = a.out / "refs.sqlite"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    iba("run", str(ds), *[x for s in a.agents for x in ("--agent", s)], "--model", a.model, "--store", str(store),
        "--no-cache", "--cache-dir", str(a.out / "cache"), "--quiet")
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    iba("report", str(store), "--dataset", str(ds), "--out", str(a.out / "report"))
    for name in ("table4", "references", "ci", "cost"):
        f = a.out / "report" / f"{name}.md"
        if f.exists():
            print(f.read_text())
    print(f"run: wall {wall:.0f} s, CPU (user+sys of the run) {cpu:.0f} s")


def direct_part(a: argparse.Namespace) -> None:
    from iba.agents.base import AgentEnv
    from iba.dataset import Dataset
    from iba.llm import resolve_backend
    from iba.retrieval.chunking import turn_line
    from iba.run.runner import make_agent

    ds = Dataset(a.full)
    backend = resolve_backend(a.model, use_cache=False)
    direct = make_agent("direct", AgentEnv(backend=backend))
    users = sorted({t.user_id for t in ds.instances})
    rows = []
    for user in random.Random(a.seed).sample(users, min(a.users, len(users))):
        task = next(t for t in ds.instances if t.user_id == user)
        history = ds.history(user)
        tokens = sum(backend.count_tokens(turn_line(t)) + 1 for t in history)
        lines, budget = direct.history_lines(task, history)
        rows.append((user, len(history), tokens, len(lines), budget))
        print(f"{user}: {len(history)} turns, {tokens} tokens; direct keeps the last {len(lines)} turns "
              f"({100 * len(lines) / len(history):.1f}%) in a {budget}-token history budget "
              f"(context window {backend.context_window})", flush=True)
    kept = sorted(100 * r[3] / r[1] for r in rows)
    print(f"median share of turns kept: {kept[len(kept) // 2]:.1f}% (range {kept[0]:.1f}-{kept[-1]:.1f}%); "
          f"median history {sorted(r[2] for r in rows)[len(rows) // 2]} tokens, {sorted(r[1] for r in rows)[len(rows) // 2]} turns")


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    if not a.skip_run:
        run_part(a)
    if a.full is not None:
        direct_part(a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
