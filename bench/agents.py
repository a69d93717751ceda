"""IBA-Agent vs RAG (and direct) on a fixed, seeded, domain-stratified sample of the full benchmark.

  python bench/agents.py                      # defaults: the figures in BENCHMARKS.md
  python bench/agents.py --n-api 48 --seed 303 --agent rag --agent 'iba?expansion=template&reranker=rules&compact=none'

What it does:
  1. builds `--preset full` into --dataset if it is not there (26 s; 326 MB),
  2. draws the sample: `--users` personas (seeded), then from their instances `--n-api` CallAPI
     instances and `--n-generate` Generate instances whose checkpoints carry verifiers, each drawn
     by `iba run --sample`'s stratified sampler (iba.run.sample.draw_sample: domains, then users and
     scenarios, balanced); the ids go to OUT/sample.json and the store records the sample, so its
     report says what it is and a store never mixes two samples (a new seed needs a new --out),
  3. runs every agent on `--chunk` instances at a time (so a stopped run leaves the agents on the
     same instances), each with `--qa-per-instance` MCQ probes, into OUT/agents.sqlite — the store
     is the resume point: rerun the same command and it continues where it stopped,
  4. writes `iba report` to OUT/report (Table 4 on the instances every agent scored, bootstrap 95%
     intervals, paired differences with sign test, attribution retrieved x applied) and prints the
     headline tables as Markdown.

Headline scores are deterministic: slot accuracy (CallAPI), MCQ accuracy (QA probes). Generate
instances need a judge (`--judge MODEL`, named in the report); without one only their verifiers
are stored and they stay out of Table 4. Runs for hours on 2 CPU cores with the 1.5B model: start
it in the background (`nohup python bench/agents.py > runs/bench-agents.log 2>&1 &`) and read the
progress line (instances done, elapsed, ETA) in the log.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shlex
import subprocess
import sys
import time
from pathlib import Path

DEFAULT_AGENTS = ("rag", "iba?expansion=template&reranker=rules&compact=none")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", type=Path, default=Path("runs/iba-full"),
                   help="IBA-Bench dataset dir; built with --preset full --seed 42 when missing (default: runs/iba-full)")
    p.add_argument("--out", type=Path, default=Path("runs/bench-agents"), help="store, sample and report (default: runs/bench-agents)")
    p.add_argument("--model", default="local:qwen2.5-coder-1.5b", help="agent model (default: local:qwen2.5-coder-1.5b)")
    p.add_argument("--base-url", default=None, help="server URL for openai: models")
    p.add_argument("--agent", action="append", dest="agents", metavar="SPEC",
                   help=f"agent spec, repeatable (default: {', '.join(DEFAULT_AGENTS)})")
    p.add_argument("--users", type=int, default=8, help="personas to sample from (default: 8)")
    p.add_argument("--seed", type=int, default=303, help="sample seed; 42, 7, 101 and 202 were used while tuning (default: 303)")
    p.add_argument("--n-api", type=int, default=24, help="CallAPI instances (default: 24)")
    p.add_argument("--n-generate", type=int, default=0, help="Generate instances with verifiers (default: 0)")
    p.add_argument("--qa-per-instance", type=int, default=1, help="MCQ probes per instance (default: 1; 0: none)")
    p.add_argument("--judge", default=None, help="judge model for Generate instances (default: none, verifiers only)")
    p.add_argument("--chunk", type=int, default=2, help="instances run by every agent before the next ones (default: 2)")
    p.add_argument("--cache-dir", type=Path, default=Path(".iba-cache"), help="response and index cache (default: .iba-cache)")
    p.add_argument("--timeout", type=float, default=3600.0, help="seconds per agent action before it is errored")
    p.add_argument("--threads", type=int, default=None,
                   help="llama.cpp threads of an embedded model (default: $IBA_LLAMA_THREADS, else every usable "
                        "CPU: this benchmark makes one model call at a time and wants the machine to itself; "
                        "on 2 idle cores that halves an action's wall time, bench/BENCHMARKS.md session 6)")
    p.add_argument("--report-only", action="store_true", help="do not run; report what the store holds")
    a = p.parse_args(argv)
    for name in ("users", "n_api", "chunk"):
        if getattr(a, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(a, name)}")
    if a.threads is not None and a.threads < 1:
        p.error(f"--threads must be >= 1, got {a.threads}")
    if a.n_generate < 0 or a.qa_per_instance < 0:
        p.error("--n-generate and --qa-per-instance must be >= 0")
    a.agents = a.agents or list(DEFAULT_AGENTS)
    return a


def ensure_dataset(path: Path) -> None:
    if (path / "manifest.json").exists():
        return
    cmd = [sys.executable, "-m", "iba.cli", "build", "--preset", "full", "--seed", "42", "--out", str(path)]
    print("$ " + shlex.join(cmd), file=sys.stderr)
    subprocess.run(cmd, check=True)


def bench_sample(ds, *, users: int, seed: int, n_api: int, n_generate: int) -> list[str]:
    """Seeded personas, then among their instances the library's stratified draw per action kind
    (iba.run.sample.draw_sample), the kinds interleaved so that any prefix of the sample mixes both.
    (Samples drawn before this used a round-robin of their own: their ids are in their sample.json.)"""
    from iba.run.sample import draw_sample

    rng = random.Random(seed)
    all_users = sorted({t.user_id for t in ds.instances})
    chosen = set(rng.sample(all_users, min(users, len(all_users))))
    keys = ds.answer_keys()

    def pick(kind: str, n: int, ok) -> list[str]:
        pool = [t for t in ds.instances if t.user_id in chosen and t.action == kind and ok(t)]
        out = [t.instance_id for t in draw_sample(pool, n, seed)]
        if len(out) < n:
            print(f"note: only {len(out)} {kind} instances among the {len(chosen)} personas (asked {n})", file=sys.stderr)
        return out

    api = pick("call_api", n_api, lambda t: bool(keys[t.instance_id].slots))
    gen = pick("generate", n_generate,
               lambda t: any(c.verifier is not None for c in keys[t.instance_id].checkpoints)) if n_generate else []
    mixed: list[str] = []
    for i in range(max(len(api), len(gen))):
        mixed += api[i:i + 1] + gen[i:i + 1]
    return mixed


def record_sample(store, ds, args: argparse.Namespace, sample: list[str]) -> None:
    """The sample in the store (iba.run.sample.bind_sample): the report names it, and a store that
    holds another sample's records is refused rather than mixed."""
    from iba.dataset import dataset_id
    from iba.run.sample import Sample, bind_sample, ids_sha

    s = Sample(dataset=dataset_id(ds), n=len(sample), asked=args.n_api + args.n_generate, seed=args.seed,
               pool=len(ds.instances), dataset_instances=len(ds.instances),
               filters={"personas": [f"{args.users} drawn with seed {args.seed}"],
                        "kinds": [f"{args.n_api} call_api with slots", f"{args.n_generate} generate with verifiers"]},
               instance_ids=sample, instance_ids_sha=ids_sha(sample),
               command=f"python bench/agents.py --users {args.users} --seed {args.seed} --n-api {args.n_api} "
                       f"--n-generate {args.n_generate}")
    note = bind_sample(store, s.dataset, s, sample)
    if note:
        print(note, flush=True)


def fmt_s(s: float) -> str:
    s = int(s)
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def run(args: argparse.Namespace, ds, sample: list[str]) -> None:
    from iba.llm import resolve_backend
    from iba.run.runner import RunConfig, run_dataset
    from iba.run.store import Store

    if args.threads is not None or not os.environ.get("IBA_LLAMA_THREADS", "").strip():
        from iba.cpus import usable_cpus

        os.environ["IBA_LLAMA_THREADS"] = str(args.threads or usable_cpus())  # read when the model loads
    backend = resolve_backend(args.model, base_url=args.base_url, cache_dir=args.cache_dir, timeout=args.timeout)
    judges = [resolve_backend(args.judge, base_url=args.base_url, cache_dir=args.cache_dir)] if args.judge else []
    store_path = args.out / "agents.sqlite"
    t0, ran, done = time.monotonic(), 0, 0
    total = {"ok": 0, "failed": 0, "errored": 0, "skipped": 0, "calls": 0}  # the line reads as totals: keep them
    with Store(store_path) as store:
        record_sample(store, ds, args, sample)
        for start in range(0, len(sample), args.chunk):
            chunk = sample[start:start + args.chunk]
            cfg = RunConfig(agents=args.agents, run="bench-agents", seed=42, instance_ids=chunk,
                            qa=args.qa_per_instance > 0, qa_per_instance=args.qa_per_instance or None,
                            timeout_s=args.timeout, cache_dir=args.cache_dir, progress=False)
            s = asyncio.run(run_dataset(ds, backend, store, cfg, judges=judges))
            done += len(chunk)
            if s.planned > s.skipped:
                ran += len(chunk)
            for k, v in (("ok", s.ok), ("failed", s.failed), ("errored", s.errored), ("skipped", s.skipped),
                         ("calls", s.usage.llm_calls)):
                total[k] += v
            elapsed = time.monotonic() - t0
            eta = elapsed / ran * (len(sample) - done) if ran else float("nan")
            print(f"[{done}/{len(sample)} instances] records: {total['ok']} ok, {total['failed']} failed, "
                  f"{total['errored']} errored, {total['skipped']} stored before; {total['calls']} LLM calls; "
                  f"elapsed {fmt_s(elapsed)}, "
                  f"ETA {fmt_s(eta) if ran else '?'}", flush=True)
            for line in s.errors[:3]:
                print(f"  {line}", flush=True)


def report(args: argparse.Namespace) -> None:
    from iba.report.build import build_report

    out = args.out / "report"
    build_report(args.out / "agents.sqlite", [args.dataset], out)
    for name in ("table4", "ci", "paired", "attribution", "fig5d_qa_vs_task"):
        f = out / f"{name}.md"
        if f.exists():
            print(f.read_text())
        elif (out / f"{name}.csv").exists():
            print(f"### {name}\n\n```\n{(out / f'{name}.csv').read_text()}```\n")
    print(f"report: {out / 'report.html'}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from iba.dataset import Dataset

    ensure_dataset(args.dataset)
    ds = Dataset(args.dataset)
    args.out.mkdir(parents=True, exist_ok=True)
    sample = bench_sample(ds, users=args.users, seed=args.seed, n_api=args.n_api, n_generate=args.n_generate)
    record = {"command": shlex.join([sys.argv[0], *(argv if argv is not None else sys.argv[1:])]),
              "dataset": str(args.dataset), "users": args.users, "seed": args.seed, "model": args.model,
              "agents": args.agents, "instances": sample}
    if not args.report_only:  # the record names the command that ran the sample, not a later report
        (args.out / "sample.json").write_text(json.dumps(record, indent=1) + "\n")
    print(f"sample: {len(sample)} instances from {args.users} personas (seed {args.seed}); agents: "
          f"{', '.join(args.agents)}; model {args.model}; store {args.out / 'agents.sqlite'}", flush=True)
    if not args.report_only:
        run(args, ds, sample)
    report(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
