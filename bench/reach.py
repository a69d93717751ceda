"""Reach vs prompt budget: does each checkpoint's / slot's gold evidence clause reach, whole, the prompt
of the step that decides it, for rag and each model-free iba configuration (issue 26)?

Two ways to get each configuration's deciding prompts, both model-free:

- with --budget (code that has `iba.run.prompt_reach`): the prompts the agents' own prompt builders
  make at each budget, retrieval run once per instance and spec (`iba eval-retrieval --agent` does
  the same; tests/run/test_prompt_reach.py holds them equal to the prompts of a real `act()`);
- with --no-budget (any code, e.g. before budgets existed): the agents' own `act()` with a *prompt
  recorder* in place of a model, which keeps every prompt and answers each structured step with the
  emptiest valid reply (no preferences, an empty plan, "unknown", the first allowed value of each
  required API parameter), so the prompts are what the code builds before any model has said anything.

The reach rule is the repository's own (src/iba/eval/reach.py, loaded by path), so the same script
measures code *before* a change (run it with that code first on PYTHONPATH) and after:

  python bench/reach.py DATASET --users 8 --seed 707 --cache-dir /tmp/wt26-cache --out runs/reach-707.jsonl \\
      --agent rag --agent 'iba?expansion=template&reranker=rules&compact=none' --budget 1000 --budget 4000
  PYTHONPATH=/tmp/old/src python bench/reach.py ... --no-budget     # code without budget options

With --budget, `&budget=B` is added to every rag and iba spec (rag: the passages that fit instead of
k=3). With --no-budget the specs run as given and the measured prompt size is reported instead.

With --model (and the model options of `iba run`: --base-url, --no-cache, --cache-dir...), specs with
LLM steps before their deciding prompts are measured too: the default `iba` (expansion=llm, salience,
compaction) or `iba?reranker=rules&compact=none` (only the expansion call), the deciding prompts being
what the agent builds after its real calls. The calls go through the response cache, so a rerun of
the same command replays them:

  python bench/reach.py DATASET --users 8 --seed 707 --cache-dir C --out llm.jsonl --model local:qwen2.5-coder-0.5b \\
      --agent 'iba?reranker=rules&compact=none' --agent 'iba?reranker=rules&compact=none&states=true' --budget 4000
Resumable: rows already in --out are skipped (rerun the same command). Prints progress with an ETA
on stderr and, at the end, the table (also with --report-only) as Markdown.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import random
import shlex
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from iba.agents.base import AgentEnv, parse_agent_spec
from iba.dataset import Dataset
from iba.llm.base import Backend, Completion
from iba import registry
from iba.commands.model_options import add_backend_arguments, backend_from_args

try:  # code before issue 26 has no model-free prompt builder: --no-budget runs its agents instead
    from iba.run.prompt_reach import SpecPrompts
except ImportError:  # pragma: no cover - depends on the code measured
    SpecPrompts = None  # type: ignore[assignment,misc]

ROOT = Path(__file__).resolve().parents[1]


def _reach_module():
    """This checkout's reach rule, whatever `iba` is on the path (the code being measured may predate it)."""
    spec = importlib.util.spec_from_file_location("iba_reach_rule", ROOT / "src" / "iba" / "eval" / "reach.py")
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[spec.name] = mod  # type: ignore[union-attr]  (dataclasses look their module up)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


REACH = _reach_module()


def minimal(schema: dict[str, Any], defs: dict[str, Any]) -> Any:
    """The emptiest value a JSON schema accepts: required keys only, empty arrays (or their minimum),
    "unknown" where an enum allows it, else its first value; numbers at their minimum."""
    if "$ref" in schema:
        return minimal(defs[schema["$ref"].split("/")[-1]], defs)
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return minimal(schema[key][0], defs)
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return "unknown" if "unknown" in schema["enum"] else schema["enum"][0]
    kind = schema.get("type")
    if kind == "object" or "properties" in schema:
        props = schema.get("properties", {})
        return {k: minimal(props[k], defs) for k in schema.get("required", [])}
    if kind == "array":
        return [minimal(schema.get("items", {}), defs) for _ in range(schema.get("minItems", 0))]
    if kind in ("integer", "number"):
        return schema.get("minimum", 0)
    if kind == "boolean":
        return False
    return "x" * max(1, schema.get("minLength", 1))


class PromptRecorder(Backend):
    """Keeps every prompt; answers with the emptiest valid reply (not a model: it decides nothing)."""

    model_id = "bench:prompt-recorder"
    context_window = 1_000_000

    def __init__(self) -> None:
        self.calls: list[list[dict[str, Any]]] = []

    async def send(self, request) -> Completion:
        self.calls.append(list(request.messages))
        json_schema = request.json_schema
        text = json.dumps(minimal(json_schema, json_schema.get("$defs", {}))) if json_schema else "ok"
        return Completion(text=text, prompt_tokens=0, completion_tokens=0, model=self.model_id)


def step_prompts(trace: list, calls: list[list[dict[str, Any]]]) -> list:
    """DecidingPrompts from a trace and the recorder's calls, in order (each LLM step made llm_calls calls)."""
    out, i = [], 0
    for s in trace:
        if s.llm_calls:
            text = "\n\n".join(str(m.get("content") or "") for m in calls[i])
            i += s.llm_calls
            if s.step in REACH.DECIDING_STEPS:
                param = s.inputs.get("param") if s.step == "align_slot" else None
                out.append(REACH.DecidingPrompt(s.step, param, REACH.normalise(text)))
    return out


def with_budget(spec: str, budget: int | None) -> str:
    name, _ = parse_agent_spec(spec)
    if budget is None or name not in ("rag", "iba"):
        return spec
    return f"{spec}{'&' if '?' in spec else '?'}budget={budget}"


def draw(ds: Dataset, users: int | None, seed: int) -> list:
    tasks = list(ds.instances)
    if users:
        pool = sorted({t.user_id for t in tasks})
        chosen = set(random.Random(seed).sample(pool, min(users, len(pool))))
        tasks = [t for t in tasks if t.user_id in chosen]
    return tasks


async def measure(a: argparse.Namespace) -> None:
    ds = Dataset(a.dataset)
    keys = ds.answer_keys()
    tasks = draw(ds, a.users, a.seed)
    budgets: list[int | None] = list(a.budgets) if a.budgets else [None]
    done: set[tuple[str, str, Any]] = set()
    if a.out.exists():
        for line in a.out.read_text().splitlines():
            row = json.loads(line)
            if "instance_id" in row:
                done.add((row["instance_id"], row["agent"], row["budget"]))
    a.out.parent.mkdir(parents=True, exist_ok=True)
    todo = [(t, s, b) for t in tasks for s in a.agents for b in budgets if (t.instance_id, s, b) not in done]
    # with --model, the specs' LLM steps before the deciding prompts (expansion, salience, compaction)
    # run on it, through the response cache: a rerun replays them
    model = {"backend": backend_from_args(a.model, a)} if a.model else {}
    with a.out.open("a") as f:
        if not done:
            f.write(json.dumps({"command": a.command, "dataset": str(a.dataset), "users": a.users, "seed": a.seed}) + "\n")
        start = time.perf_counter()
        slow = not budgets or budgets == [None]
        groups: dict[tuple[str, str], list[Any]] = {}
        for task, spec, budget in todo:
            groups.setdefault((task.instance_id, spec), []).append((task, budget))
        n, shown = 0, 0.0
        for (_, spec), items in groups.items():
            task = items[0][0]
            key = keys[task.instance_id]
            history = ds.history(task.user_id)
            turns = {t.id: t for t in history}
            slots = {s.id for s in key.slots}
            builder = None if slow else SpecPrompts(spec, task, history, a.cache_dir, scenarios=ds.scenario_names, **model)
            for _, budget in items:
                n += 1
                if builder is not None:
                    prompts = await builder.prompts(budget)
                else:
                    if a.model:
                        raise SystemExit("bench/reach.py: --model needs --budget (the prompt builders); --no-budget records a model-free act()")
                    recorder = PromptRecorder()
                    env = AgentEnv(backend=recorder, cache_dir=a.cache_dir, scenarios=ds.scenario_names)
                    name, options = parse_agent_spec(with_budget(spec, budget))
                    agent = registry.resolve("agents", name)(env, **options)
                    action = await agent.act(task, history)
                    prompts = step_prompts(action.trace, recorder.calls)
                reached = REACH.reach_of(key, turns, prompts)
                f.write(json.dumps({
                    "instance_id": task.instance_id, "agent": spec, "budget": budget, "action": task.action,
                    "tokens": max((len(p.text) // 4 for p in prompts), default=0),
                    "targets": {tid: {"kind": "slot" if tid in slots else "checkpoint", "reached": hit} for tid, hit in reached.items()},
                }) + "\n")
                f.flush()
            el = time.perf_counter() - start
            if sys.stderr.isatty() or el - shown >= 30 or n == len(todo):
                shown = el
                end = "" if sys.stderr.isatty() and n < len(todo) else "\n"
                print(f"\r{n}/{len(todo)} done, {el:.0f}s elapsed, ETA {el / n * (len(todo) - n):.0f}s   ", end=end, file=sys.stderr, flush=True)


def cluster_ci(hits: list[int], sizes: list[int], n_boot: int = 2000, seed: int = 0) -> tuple[float, float]:
    """95% percentile bootstrap interval of the share reached, resampling instances (an instance's
    targets share its history and retrieval, so they are not independent draws)."""
    h, m = np.asarray(hits, dtype=float), np.asarray(sizes, dtype=float)
    idx = np.random.default_rng(seed).integers(0, h.size, size=(n_boot, h.size))
    lo, hi = np.quantile(h[idx].sum(axis=1) / m[idx].sum(axis=1), [0.025, 0.975])
    return float(lo), float(hi)


def paired_ci(a: list[tuple[int, int]], b: list[tuple[int, int]], n_boot: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """Share reached by a minus share reached by b over the same instances ((hits, targets) per instance),
    with its 95% bootstrap interval resampling instances."""
    ha, hb, m = (np.asarray(x, dtype=float) for x in ([h for h, _ in a], [h for h, _ in b], [n for _, n in a]))
    idx = np.random.default_rng(seed).integers(0, m.size, size=(n_boot, m.size))
    diffs = (ha[idx].sum(axis=1) - hb[idx].sum(axis=1)) / m[idx].sum(axis=1)
    lo, hi = np.quantile(diffs, [0.025, 0.975])
    return float((ha.sum() - hb.sum()) / m.sum()), float(lo), float(hi)


def _hits(r: dict, kind: str) -> tuple[int, int]:
    flags = [t["reached"] for t in r["targets"].values() if t["kind"] == kind and t["reached"] is not None]
    return sum(flags), len(flags)


def against(path: Path, base: str) -> str:
    """Each configuration minus `base` at the same budget, on the instances both have (paired)."""
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    rows = [r for r in rows if "instance_id" in r]
    by = {(r["agent"], r["budget"], r["instance_id"]): r for r in rows}
    out = [f"Paired against `{base}` (same instances, 95% bootstrap interval over instances):", "",
           "| configuration | budget | slots, difference [95% CI] | checkpoints, difference [95% CI] |", "|---|---|---|---|"]
    for spec, budget in dict.fromkeys((r["agent"], r["budget"]) for r in rows):
        if spec == base:
            continue
        ids = [i for (s, b, i) in by if s == spec and b == budget and (base, budget, i) in by]
        cells = []
        for kind in ("slot", "checkpoint"):
            pairs = [(_hits(by[(spec, budget, i)], kind), _hits(by[(base, budget, i)], kind)) for i in ids]
            pairs = [(x, y) for x, y in pairs if x[1]]
            if not pairs:
                cells.append("–")
                continue
            d, lo, hi = paired_ci([x for x, _ in pairs], [y for _, y in pairs])
            cells.append(f"{d:+.3f} [{lo:+.3f}, {hi:+.3f}]")
        out.append(f"| `{spec}` | {budget if budget is not None else 'as built'} | {cells[0]} | {cells[1]} |")
    return "\n".join(out)


def report(path: Path) -> str:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    head = rows[0] if rows and "command" in rows[0] else {}
    rows = [r for r in rows if "instance_id" in r]
    groups: dict[tuple[str, Any], list[dict]] = {}
    for r in rows:
        groups.setdefault((r["agent"], r["budget"]), []).append(r)
    out = [f"`{head.get('command', '')}`", "",
           "| configuration | budget | slots reached [95% CI] (n) | checkpoints reached [95% CI] (n) | deciding prompt tokens, median |",
           "|---|---|---|---|---|"]
    for (spec, budget), rs in groups.items():
        cells = []
        for kind in ("slot", "checkpoint"):
            per = [[t["reached"] for t in r["targets"].values() if t["kind"] == kind and t["reached"] is not None] for r in rs]
            per = [f for f in per if f]
            n = sum(len(f) for f in per)
            if not n:
                cells.append("–")
                continue
            lo, hi = cluster_ci([sum(f) for f in per], [len(f) for f in per])
            cells.append(f"{sum(map(sum, per)) / n:.3f} [{lo:.2f}, {hi:.2f}] ({n})")
        toks = statistics.median(r["tokens"] for r in rs)
        out.append(f"| `{spec}` | {budget if budget is not None else 'as built'} | {cells[0]} | {cells[1]} | {toks:.0f} |")
    return "\n".join(out)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dataset", type=Path, help="dataset directory (IBA-Bench build or PrefEval import)")
    p.add_argument("--users", type=int, default=None, help="a seeded sample of N users (default: all)")
    p.add_argument("--seed", type=int, default=707, help="sample seed (default 707)")
    p.add_argument("--agent", action="append", dest="agents", metavar="SPEC", required=False,
                   help="model-free configuration, repeatable (default: rag and the model-free iba)")
    p.add_argument("--budget", action="append", type=int, dest="budgets", metavar="TOKENS",
                   help="deciding-prompt budget, repeatable (added as &budget=B to rag and iba specs)")
    p.add_argument("--no-budget", action="store_true", help="run the specs as given (code without budgets)")
    add_backend_arguments(p, model_default=None, model_help="run the specs' LLM steps before the deciding prompts "
                          "(iba's expansion=llm, states=true, reranker=llm, compact=llm) on this model, through the "
                          "response cache in --cache-dir; without it only model-free specs are measured. ")
    p.add_argument("--out", type=Path, required=True, help="JSONL of per-instance results (the resume point)")
    p.add_argument("--report-only", action="store_true")
    p.add_argument("--against", metavar="SPEC", help="also report each configuration minus SPEC, paired by instance")
    a = p.parse_args()
    a.command = "python bench/reach.py " + " ".join(shlex.quote(x) for x in sys.argv[1:])
    a.agents = a.agents or ["rag", "iba?expansion=template&reranker=rules&compact=none"]
    if a.no_budget:
        a.budgets = []
    elif not a.budgets:
        a.budgets = [1000, 2000, 4000, 8000]
    if a.budgets and SpecPrompts is None:
        p.error("this code has no prompt budgets (iba.run.prompt_reach); use --no-budget")
    if a.model and not a.budgets:
        p.error("--model needs --budget: the prompts are built by iba.run.prompt_reach")
    if not a.report_only:
        asyncio.run(measure(a))
    print(report(a.out))
    if a.against:
        print("\n" + against(a.out, a.against))


if __name__ == "__main__":
    main()
