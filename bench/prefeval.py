"""PrefEval on IBA: import, gold-evidence recall, MCQ accuracy and generation score.

For each filler length N (default 300; e.g. `--filler 10 --filler 100 --filler 300`):
  1. `iba import prefeval PREFEVAL --out OUT/prefeval-FORM-fN --topics ... --filler-turns N --limit L`
  2. `iba eval-retrieval OUT/prefeval-FORM-fN --json`   (dense top-3 vs Deep Retrieval recall@k)
  3. the agents (direct, rag, iba) on the MCQ (QA probe) of every instance, and with `--judge`
     also on the task itself, scored by that judge with PrefEval's four error-type checkpoints.
     `--mcq-only` (default) asks only the QA probes; `--tasks` runs `iba run --qa` (task + probe).
Results go to OUT/prefeval.sqlite (resumable: rerun the same command to continue) and a summary
to OUT/prefeval-summary.json and stdout (Markdown). The imported data is PrefEval's (CC BY-NC 4.0):
OUT defaults to runs/prefeval, which git ignores; keep it out of the repository.

Example (the figures in BENCHMARKS.md):
  python bench/prefeval.py ../shared/data/prefeval --topics travel_restaurant,shop_motors \\
      --filler 300 --limit 5 --out runs/prefeval
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shlex
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

IBA = [sys.executable, "-m", "iba.cli"]
AGENTS = ("direct", "rag", "iba")


def sh(cmd: list[str], *, capture: bool = False) -> str:
    print("$ " + " ".join(["iba", *(shlex.quote(c) for c in cmd[len(IBA):])]), file=sys.stderr)
    res = subprocess.run(cmd, check=True, text=True, stdout=subprocess.PIPE if capture else None)
    return res.stdout if capture else ""


def dataset_dir(out: Path, form: str, n: int) -> Path:
    return out / f"prefeval-{form}-f{n}"


def do_import(a: argparse.Namespace, n: int) -> Path:
    ds = dataset_dir(a.out, a.form, n)
    cmd = [*IBA, "import", "prefeval", str(a.prefeval), "--out", str(ds), "--form", a.form,
           "--filler-turns", str(n), "--position", a.position, "--seed", str(a.seed)]
    if a.topics:
        cmd += ["--topics", a.topics]
    if a.limit:
        cmd += ["--limit", str(a.limit)]
    sh(cmd)
    return ds


def do_retrieval(a: argparse.Namespace, ds: Path) -> dict:
    out = sh([*IBA, "eval-retrieval", str(ds), "--json", "--cache-dir", str(a.cache_dir)], capture=True)
    return json.loads(out.strip().splitlines()[-1])


async def _mcq_only(ds_path: Path, agents: list[str], run: str, a: argparse.Namespace) -> None:
    """Ask only the QA probes, stored exactly as `iba run --qa` stores them (same run keys), so a
    later `iba run --qa` on the same store resumes with the tasks instead of redoing the probes."""
    from iba.agents.base import AgentEnv
    from iba.dataset import Dataset, dataset_id
    from iba.llm import resolve_backend
    from iba.run.runner import RunConfig, make_agent, qa_task, run_key, run_one, score_stored
    from iba.run.store import Store

    ds = Dataset(ds_path)
    keys = ds.answer_keys()
    by_id = {t.instance_id: t for t in ds.instances}
    backend = resolve_backend(a.model, cache_dir=a.cache_dir, timeout=a.timeout)
    cfg = RunConfig(agents=agents, run=run, seed=a.seed, qa=True, cache_dir=a.cache_dir, timeout_s=a.timeout)
    did = dataset_id(ds)
    with Store(a.out / "prefeval.sqlite") as store:
        for spec in agents:
            agent = make_agent(spec, AgentEnv(backend=backend, cache_dir=a.cache_dir, seed=a.seed))
            for task in _first_per_topic(ds.instances, a.agent_limit):
                for probe in keys[task.instance_id].qa:
                    q = qa_task(task, probe)
                    if store.has_run(run_key(did, q.instance_id, spec, backend.model_id, 0)):
                        continue
                    t0 = time.perf_counter()
                    rec = await run_one(agent, spec, q, ds.history(task.user_id), dataset=did,
                                        model=backend.model_id, trial=0, cfg=cfg)
                    store.put_run(rec)
                    await score_stored(rec, by_id, keys, store, judges=[])
                    print(f"  {spec:<7}{q.instance_id}: {rec.status} {time.perf_counter() - t0:.1f}s", file=sys.stderr)


def _first_per_topic(tasks: list, k: int | None) -> list:
    if not k:
        return tasks
    seen: dict[str, int] = defaultdict(int)
    out = []
    for t in tasks:
        seen[t.scenario] += 1
        if seen[t.scenario] <= k:
            out.append(t)
    return out


def do_agents(a: argparse.Namespace, ds: Path, n: int) -> str:
    run = f"prefeval-{a.form}-f{n}"
    agents = [s for s in a.agents.split(",") if s]
    if a.tasks or a.judge:
        cmd = [*IBA, "run", str(ds), "--qa", "--store", str(a.out / "prefeval.sqlite"), "--run", run,
               "--model", a.model, "--judges", a.judge or "none", "--cache-dir", str(a.cache_dir),
               "--seed", str(a.seed), "--timeout", str(a.timeout), "--quiet"]
        for spec in agents:
            cmd += ["--agent", spec]
        if a.retry_errored:
            cmd.append("--retry-errored")
        if a.agent_limit:  # `iba run --limit` counts over the whole selection, so one call per topic
            from iba.dataset import Dataset

            for topic in dict.fromkeys(t.scenario for t in Dataset(ds).instances):
                sh(cmd + ["--scenario", topic, "--limit", str(a.agent_limit)])
        else:
            sh(cmd)
    else:
        print(f"$ (MCQ only) {run}: agents {','.join(agents)} on the QA probes of {ds}", file=sys.stderr)
        asyncio.run(_mcq_only(ds, agents, run, a))
    return run


def collect(store_path: Path, runs: dict[str, int]) -> dict:
    """MCQ accuracy and generation score per (agent, filler length) and per (agent, topic)."""
    from iba.eval.qa import SCORER as QA_SCORER
    from iba.run.store import Store

    cells: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    unscored: dict[tuple[str, str, str], int] = defaultdict(int)
    with Store(store_path) as store:
        meta = {}
        for run, n in runs.items():
            for rec in store.runs(run):
                meta[rec.key] = (rec.agent, rec.scenario, n)
        for sr in store.scores():
            if sr.run_key not in meta:
                continue
            agent, topic, n = meta[sr.run_key]
            metric = "mcq" if sr.scorer == QA_SCORER else f"gen[{sr.scorer.removeprefix('judge:')}]" if sr.scorer.startswith("judge:") else None
            if metric is None:
                continue
            for group in (f"f{n}", f"f{n}/{topic}"):
                if sr.score is None:
                    unscored[(metric, agent, group)] += 1
                else:
                    cells[(metric, agent, group)].append(sr.score)
    table = {}
    for (metric, agent, group), vals in sorted(cells.items()):
        table.setdefault(metric, {}).setdefault(group, {})[agent] = {
            "mean": round(sum(vals) / len(vals), 4), "n": len(vals), "unscored": unscored.get((metric, agent, group), 0)}
    for (metric, agent, group), k in unscored.items():
        table.setdefault(metric, {}).setdefault(group, {}).setdefault(agent, {"mean": None, "n": 0, "unscored": k})
    return table


def markdown(summary: dict, agents: list[str]) -> str:
    lines = []
    if summary["retrieval"]:
        lines += ["| filler | instances | dense top-3 R@3 | dense top-3 R@10 | deep R@3 | deep R@10 | bm25 R@10 | hybrid R@10 |",
                  "|---|---|---|---|---|---|---|---|"]
        for n, r in summary["retrieval"].items():
            lines.append(f"| {n} | {r['dense_top3']['instances']} | {r['dense_top3']['recall@3']:.3f} | "
                         f"{r['dense_top3']['recall@10']:.3f} | {r['deep']['recall@3']:.3f} | {r['deep']['recall@10']:.3f} | "
                         f"{r['bm25']['recall@10']:.3f} | {r['hybrid']['recall@10']:.3f} |")
        lines.append("")
    for metric, groups in summary["scores"].items():
        lines += [f"**{metric}** (mean, n scored, unscored)", "",
                  "| group | " + " | ".join(agents) + " |", "|---|" + "---|" * len(agents)]
        for group, row in groups.items():
            cells = [(f"{row[a]['mean']:.3f} ({row[a]['n']}, {row[a]['unscored']})" if row.get(a) and row[a]["mean"] is not None
                      else (f"- (0, {row[a]['unscored']})" if row.get(a) else "")) for a in agents]
            lines.append(f"| {group} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("prefeval", type=Path, help="PrefEval benchmark_dataset folder (e.g. ../shared/data/prefeval)")
    p.add_argument("--out", type=Path, default=Path("runs/prefeval"), help="datasets, store and summary (default: runs/prefeval)")
    p.add_argument("--topics", default="", help="comma-separated topics (default: all in the folder)")
    p.add_argument("--form", choices=("explicit", "choice", "persona"), default="explicit")
    p.add_argument("--filler", type=int, action="append", help="filler length, repeatable (default: 300)")
    p.add_argument("--position", choices=("start", "middle", "random"), default="start")
    p.add_argument("--limit", type=int, default=None, help="instances per topic (default: all)")
    p.add_argument("--agent-limit", type=int, default=None, help="run the agents on only the first N instances per topic (default: all imported)")
    p.add_argument("--agents", default=",".join(AGENTS), help="comma-separated agent specs (default: direct,rag,iba)")
    p.add_argument("--model", default=None, help="agent model (default: iba's default local model)")
    p.add_argument("--judge", default=None, help="judge model for the generation score (implies --tasks); none: no generation score")
    p.add_argument("--tasks", action="store_true", help="also run the tasks (iba run --qa), not only the MCQ probes")
    p.add_argument("--retry-errored", action="store_true", help="run again the tasks whose stored record is errored (e.g. timeouts)")
    p.add_argument("--skip-agents", action="store_true", help="import and retrieval only")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--timeout", type=float, default=900.0, help="seconds per agent action")
    p.add_argument("--cache-dir", type=Path, default=Path(".iba-cache"))
    a = p.parse_args(argv)
    if a.model is None:
        from iba.llm import DEFAULT_MODEL

        a.model = DEFAULT_MODEL
    a.out.mkdir(parents=True, exist_ok=True)
    fillers = a.filler or [300]
    summary: dict = {"params": {k: str(v) for k, v in vars(a).items()}, "retrieval": {}, "scores": {}, "wall_s": {}}
    runs: dict[str, int] = {}
    for n in fillers:
        t0 = time.perf_counter()
        ds = do_import(a, n)
        summary["retrieval"][n] = do_retrieval(a, ds)
        summary["wall_s"][f"import+retrieval f{n}"] = round(time.perf_counter() - t0, 1)
        if not a.skip_agents:
            t0 = time.perf_counter()
            runs[do_agents(a, ds, n)] = n
            summary["wall_s"][f"agents f{n}"] = round(time.perf_counter() - t0, 1)
    if runs:
        summary["scores"] = collect(a.out / "prefeval.sqlite", runs)
    (a.out / "prefeval-summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(markdown(summary, [s for s in a.agents.split(",") if s]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
