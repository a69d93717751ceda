"""What holds reach back: for each checkpoint/slot whose gold clause does not reach the deciding prompt of
a model-free iba configuration, where its gold turns were lost (issue 26).

  reached           shown whole
  kept, not shown   in a passage the salience rules kept (or a repeat folded into one), but the view of
                    the deciding prompt left it out at this budget
  pool, not shown   in the candidate pool only (the view draws from the kept passages, then the other
                    candidates by salience), and left out
  never retrieved   no gold turn of the target is in any passage Deep Retrieval found

  python bench/reach_misses.py DATASET --users 8 --seed 101 --budget 4000 --cache-dir C [--spec 'unit=mixed'] [--show 30]
  python bench/reach_misses.py ... --spec states=true --model local:qwen2.5-coder-0.5b   # LLM steps, cached

Each miss is also counted by where its preference comes from (`preference`: a lasting one; `state`: a
transient state, e.g. a recent injury that rules out a long walk) and by the Table 12 signal of its
gold clause; --show prints misses with those and how many days before the request the gold turn is.

Tuning aid: run it on a tuning sample, not on held-out users. Read-only except for the index cache.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
from datetime import datetime
from pathlib import Path

from iba.agents.base import AgentEnv, parse_agent_spec, parse_options
from iba.agents.iba_options import IBAOptions
from iba.agents.toolkit import Toolkit
from iba.agents.trace import Trace
from iba.commands.model_options import add_backend_arguments, backend_from_args
from iba.dataset import Dataset
from iba.eval.reach import gold_clauses, reach_of, target_params
from iba.retrieval.evaluate import sample_users
from iba.run.prompt_reach import SpecPrompts


async def main(a: argparse.Namespace) -> None:
    ds = Dataset(a.dataset)
    keys = ds.answer_keys()
    tasks = sample_users(list(ds.instances), a.users, a.seed) if a.users else list(ds.instances)
    spec = "iba?expansion=template&reranker=rules&compact=none" + (f"&{a.spec}" if a.spec else "")
    # with --model, the spec's LLM steps (states=true, expansion=llm) run on it through the response
    # cache: the same calls as bench/reach.py --model made, replayed
    backend = backend_from_args(a.model, a) if a.model else None
    opts = parse_options(IBAOptions, {**parse_agent_spec(spec)[1], "budget": str(a.budget)}, "iba")
    stages: dict[str, collections.Counter[str]] = {"slot": collections.Counter(), "checkpoint": collections.Counter()}
    # misses by where the preference comes from (a lasting preference, or a transient state) and the
    # Table 12 signal of its gold clause
    why: dict[str, collections.Counter[tuple[str, str, str]]] = {"slot": collections.Counter(), "checkpoint": collections.Counter()}
    for task in tasks:
        key = keys[task.instance_id]
        history = ds.history(task.user_id)
        turns = {t.id: t for t in history}
        reached = reach_of(key, turns, await SpecPrompts(f"{spec}", task, history, a.cache_dir, scenarios=ds.scenario_names, backend=backend).prompts(a.budget))
        tools = Toolkit(AgentEnv(backend=backend, cache_dir=a.cache_dir, scenarios=ds.scenario_names), opts, task, history, Trace())  # type: ignore[arg-type]
        await tools.deep_retrieve()
        pool = {t for p in tools.pool.passages for t in p.turn_ids} if tools.pool else set()
        kept = {t for p in tools.evidence for t in p.turn_ids}
        ranked = {t for p in tools.ranked for t in p.turn_ids}
        clauses, params = gold_clauses(key, turns), target_params(key)
        targets = {c.id: c for c in key.checkpoints} | {s.id: s for s in key.slots}
        signals = {(lb.turn_id, lb.dimension): lb.signal_type for lb in key.evidence}
        now = datetime.fromisoformat(task.now)
        for tid, hit in reached.items():
            if hit is None:
                continue
            kind = "checkpoint" if params[tid] is None else "slot"
            target = targets[tid]
            gold = set(target.evidence)
            stage = ("reached" if hit else "kept, not shown" if gold & kept else
                     "pool, not shown" if gold & (pool | ranked) else "never retrieved")
            stages[kind][stage] += 1
            if hit:
                continue
            signal = next((signals[(t, target.dimension)] for t in target.evidence if (t, target.dimension) in signals), "?")
            why[kind][(stage, target.source, signal)] += 1
            if a.show > 0:
                a.show -= 1
                days = min(((now - datetime.fromisoformat(turns[t].timestamp)).days for t in gold if t in turns), default=None)
                print(f"{task.instance_id} {tid} {params[tid] or ''} {stage} ({target.source}, {signal}, {days} days before): "
                      f"{clauses[tid][0][:140] if clauses[tid] else ''}")
    for kind, c in stages.items():
        n = sum(c.values())
        if n:
            print(f"{kind}s ({n}): " + ", ".join(f"{s} {c[s]} ({100 * c[s] / n:.0f}%)" for s in
                                                ("reached", "kept, not shown", "pool, not shown", "never retrieved")))
            print("  misses by stage, source, signal: " + ", ".join(f"{st} / {src} / {sig} {m}" for (st, src, sig), m in sorted(why[kind].items())))


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dataset", type=Path)
    p.add_argument("--users", type=int, default=8)
    p.add_argument("--seed", type=int, default=101)
    p.add_argument("--budget", type=int, default=4000)
    p.add_argument("--spec", default="", help="extra iba options, e.g. unit=mixed&contrast=true")
    p.add_argument("--show", type=int, default=0, help="print this many misses")
    add_backend_arguments(p, model_default=None, model_help="for --spec options with LLM steps (states=true, "
                          "expansion=llm): ")
    asyncio.run(main(p.parse_args()))
