"""Per-action cost of agents, side by side on the same instances, from `bench/agents.py` stores.

For every (store, agent) given: LLM calls, prompt tokens (and of them the ones the model did not
evaluate again: `reused`), completion tokens, wall seconds of the action, seconds of its LLM steps,
and the deterministic task score (slot accuracy), per instance and as medians / means over the
instances that every column has. Read-only; the stores are not touched.

  python bench/agent_cost.py runs/bench-cost/before runs/bench-cost/chain
  python bench/agent_cost.py runs/bench-cost/before:iba runs/bench-cost/chain --steps

A column is STORE or STORE:AGENT (an agent spec of that store; default: each agent it holds).
STORE is a bench/agents.py --out folder or its agents.sqlite.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import sys
from pathlib import Path


def _store_file(path: Path) -> Path:
    return path / "agents.sqlite" if path.is_dir() else path


def read_column(spec: str) -> dict[str, dict[str, dict]]:
    """agent -> instance id -> {"record": ..., "score": float | None} for the task records that are
    ok or failed (errored ones are infrastructure faults, to be rerun, and are left out)."""
    path, _, only = spec.partition(":") if not Path(spec).exists() else (spec, "", "")
    store = _store_file(Path(path))
    if not store.exists():
        raise SystemExit(f"agent_cost: no store at {store} (give a bench/agents.py --out folder or its agents.sqlite)")
    con = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        # failed records are the agent's own failures: they count, with their score of 0
        runs = con.execute("select key, instance_id, agent, record from runs "
                           "where status in ('ok', 'failed') and trial = 0").fetchall()
        scores = {k: json.loads(r) for k, r in con.execute("select run_key, record from scores where scorer = 'slots'")}
    finally:
        con.close()
    out: dict[str, dict[str, dict]] = {}
    for key, inst, agent, rec in runs:
        if "::qa::" in inst or (only and agent != only):
            continue
        s = scores.get(key)
        out.setdefault(agent, {})[inst] = {"record": json.loads(rec), "score": None if s is None else s.get("score")}
    if only and only not in out:
        raise SystemExit(f"agent_cost: {store} holds no ok records of agent {only!r}")
    return {f"{Path(path).name}:{agent}": v for agent, v in out.items()}


def _steps(rec: dict) -> list[dict]:
    """The action's trace, or for a failed record the steps that ran before it failed."""
    return ((rec.get("action") or {}).get("trace")) or rec.get("partial_trace") or []


def cost(entry: dict) -> dict[str, float]:
    rec = entry["record"]
    usage = rec.get("usage") or {}
    steps = _steps(rec)
    return {
        "calls": usage.get("llm_calls", 0),
        "prompt": usage.get("prompt_tokens", 0),
        "reused": usage.get("reused_prompt_tokens", 0),
        "completion": usage.get("completion_tokens", 0),
        "wall_s": rec.get("latency_s", 0.0),
        "llm_s": sum(s.get("latency_s", 0.0) for s in steps if s.get("llm_calls")),
        "score": entry["score"],
        "status": rec.get("status", "ok"),
    }


def step_rows(entry: dict) -> list[str]:
    steps = _steps(entry["record"])
    return [f"{s['step']} {s.get('prompt_tokens', 0)}p/{s.get('reused_prompt_tokens', 0)}r/"
            f"{s.get('completion_tokens', 0)}c {s.get('latency_s', 0.0):.0f}s" for s in steps if s.get("llm_calls")]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("columns", nargs="+", metavar="STORE[:AGENT]")
    p.add_argument("--steps", action="store_true", help="also list each LLM step's tokens and seconds")
    a = p.parse_args(argv)
    cols: dict[str, dict[str, dict]] = {}
    for spec in a.columns:
        cols.update(read_column(spec))
    shared = sorted(set.intersection(*(set(v) for v in cols.values()))) if cols else []
    if not shared:
        print("no instance has a scored record in every column", file=sys.stderr)
        return 1
    print(f"{len(shared)} instances with an ok or failed record in every column: {', '.join(shared)}\n")
    print("| column | calls | prompt tok | of which reused | completion tok | wall s | LLM-step s | slot score |")
    print("|---|---|---|---|---|---|---|---|")
    for name, recs in cols.items():
        cs = [cost(recs[i]) for i in shared]
        med = {k: statistics.median(c[k] for c in cs) for k in ("calls", "prompt", "reused", "completion", "wall_s", "llm_s")}
        scored = [c["score"] for c in cs if c["score"] is not None]
        mean = f"{100 * statistics.mean(scored):.1f} (n={len(scored)})" if scored else "-"
        print(f"| {name} | {med['calls']:.0f} | {med['prompt']:.0f} | {med['reused']:.0f} | {med['completion']:.0f} "
              f"| {med['wall_s']:.0f} | {med['llm_s']:.0f} | {mean} |")
    print("\nmedians over the instances; slot score: mean x100\n")
    for inst in shared:
        print(f"{inst}:")
        for name, recs in cols.items():
            c = cost(recs[inst])
            score = "-" if c["score"] is None else f"{100 * c['score']:.0f}"
            print(f"  {name}: {c['calls']} calls, {c['prompt']}p ({c['reused']} reused) + {c['completion']}c, "
                  f"{c['wall_s']:.0f} s (LLM steps {c['llm_s']:.0f} s), score {score}"
                  + ("" if c["status"] == "ok" else f" [{c['status']}]"))
            if a.steps:
                for s in step_rows(recs[inst]):
                    print(f"      {s}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
