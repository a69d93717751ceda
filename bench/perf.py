"""The performance suite (issue 10): every figure, its target and its command, into bench/BENCHMARKS.md.

  python bench/perf.py                    # everything (`make bench`), about 15 minutes on 2 idle cores
  python bench/perf.py --only embed,score # some sections; the others keep their last figures

Sections (each names the command a user would type for the same work):
  embed        a 10,000-turn history into the index cache with the packaged MiniLM (256/50 windows),
               cold and cached; short-sentence ceiling; one thread vs all cores
  build        `iba build --preset full` under /usr/bin/time -v: wall and peak memory
  harness      every full-benchmark instance through the runner with an instant in-process backend
               (everything but the model: history, agent, store), per-instance overhead
  score        `iba score --judges none` over that store (API slots + verifiers of ~6,962 records)
  concurrency  `iba run --concurrency 1` vs `8` against a latency-bound OpenAI-compatible server
               (bench/stub_server.py), requests in flight counted at the server; a rerun with the
               response cache makes no request
  scaleout     (issue 13) local executor vs Ray with 2 workers vs 2 endpoints, against servers that
               serve one request at a time (latency-bound), and the projected full-benchmark wall time
  model        `python -m iba.llm.speed`: prompt and decode tokens/s of the packaged models
  effort       LLM calls and tokens per action of each agent in the agent benchmark's store

Results go to bench/results/perf.json (one entry per section, with the machine's load) and the
block between the perf markers of bench/BENCHMARKS.md is rewritten from it. Medians of --repeats
runs unless a row says otherwise. Timing is measured here, never asserted in tests.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "perf.json"
BENCHMARKS = ROOT / "bench" / "BENCHMARKS.md"
BEGIN, END = "<!-- perf:begin (bench/perf.py rewrites this block) -->", "<!-- perf:end -->"
SECTIONS = ("embed", "build", "harness", "score", "concurrency", "scaleout", "model", "effort")
IBA = [sys.executable, "-m", "iba.cli"]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", default=",".join(SECTIONS), help=f"comma-separated sections (default: all of {', '.join(SECTIONS)})")
    p.add_argument("--work", type=Path, default=ROOT / "runs" / "bench-perf",
                   help="scratch: builds, stores, caches (default: runs/bench-perf)")
    p.add_argument("--repeats", type=int, default=3, help="runs per timed figure, median reported (default: 3)")
    p.add_argument("--embed-turns", type=int, default=10_000, help="turns of the embedding history (default: 10000)")
    p.add_argument("--harness-limit", type=int, default=None, help="instances for harness/score (default: all)")
    p.add_argument("--latency", type=float, default=0.5, help="stub server seconds per request (default: 0.5)")
    p.add_argument("--models", default="local:qwen2.5-coder-0.5b,local:qwen2.5-coder-1.5b",
                   help="models for the speed section (default: the packaged 0.5B and 1.5B)")
    p.add_argument("--agents-store", type=Path, action="append", default=None,
                   help="a bench/agents.py store for the effort section (repeatable; default: "
                        "runs/bench-agents/agents.sqlite); the first also gives the projection its seconds per action")
    p.add_argument("--no-write", action="store_true", help="print only; do not touch BENCHMARKS.md / results")
    a = p.parse_args(argv)
    a.only = [s.strip() for s in a.only.split(",") if s.strip()]
    a.agents_stores = a.agents_store or [ROOT / "runs" / "bench-agents" / "agents.sqlite"]
    a.agents_store = a.agents_stores[0]
    bad = [s for s in a.only if s not in SECTIONS]
    if bad:
        p.error(f"--only: unknown section(s) {', '.join(bad)}; choose from {', '.join(SECTIONS)}")
    if a.repeats < 1:
        p.error("--repeats must be >= 1")
    return a


def log(msg: str) -> None:
    print(f"[perf {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def row(figure: str, value: str, target: str = "", met: bool | None = None, command: str = "", note: str = "") -> dict:
    return {"figure": figure, "value": value, "target": target, "met": met, "command": command, "note": note}


def timed(fn: Callable[[], Any], repeats: int) -> tuple[float, list[float], Any]:
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), times, out


def fmt_times(ts: list[float]) -> str:
    return ", ".join(f"{t:.2f}" for t in ts)


def ensure_build(work: Path, preset: str) -> Path:
    out = work / f"iba-{preset}"
    if not (out / "manifest.json").exists():
        log(f"building --preset {preset} into {out}")
        subprocess.run([*IBA, "build", "--preset", preset, "--seed", "42", "--out", str(out), "--no-progress"],
                       check=True, stdout=subprocess.DEVNULL)
    return out


# --------------------------------------------------------------------------- sections


def sec_embed(a: argparse.Namespace) -> list[dict]:
    import numpy as np

    from iba.dataset import Dataset
    from iba.retrieval.minilm import MiniLMEmbedder
    from iba.retrieval.index import HistoryIndex, clear_memory_cache

    ds = Dataset(ensure_build(a.work, "full"))
    turns: list = []
    for user in sorted({t.user_id for t in ds.instances}):
        turns += ds.history(user)
        if len(turns) >= a.embed_turns:
            break
    turns = turns[: a.embed_turns]
    rows = []
    from iba.retrieval import onnx_bert
    from iba.retrieval.chunking import make_units

    cores = max(1, len(os.sched_getaffinity(0)))
    engines = (["onnx"] if onnx_bert.available() else []) + ["numpy"]
    words = "the user asked about trains spicy food meetings budgets hotels and weekend plans again".split()
    short = [" ".join(words[(i + j) % len(words)] for j in range(20)) for i in range(600)]
    windows = [c.text for c in make_units(turns[:1000], "token", MiniLMEmbedder(engine="numpy").token_spans)]
    for engine in engines:
        for threads in sorted({1, cores}):
            emb = MiniLMEmbedder(engine=engine, threads=threads)
            emb.encode(short[:32])  # warm up
            med, ts, _ = timed(lambda: emb.encode(short), a.repeats)
            rows.append(row(f"{engine} engine, {threads} thread(s): 600 twenty-word texts", f"**{len(short) / med:.0f} texts/s**",
                            "ceiling ~170/s", None, "bench/perf.py --only embed", f"runs {fmt_times(ts)} s"))
        t0 = time.perf_counter()
        emb.encode(windows)
        dt = time.perf_counter() - t0
        n_tok = sum(len(e.ids) for e in emb.tokenizer.encode_batch(windows))
        rows.append(row(f"{engine} engine, {cores} thread(s): {len(windows)} windows of <=256 tokens (1,000 turns)",
                        f"**{len(windows) / dt:.1f} windows/s** ({n_tok / dt:.0f} tokens/s, {1000 / dt:.0f} turns/s)",
                        "long-text throughput", None, "bench/perf.py --only embed", "one run"))
    emb = MiniLMEmbedder(threads=cores)  # the default engine
    cache = Path(tempfile.mkdtemp(prefix="embed-", dir=a.work))
    try:
        clear_memory_cache()
        t0 = time.perf_counter()
        index = HistoryIndex.build(turns, emb, cache_dir=cache)
        cold = time.perf_counter() - t0
        tokens = int(sum(len(emb.tokenizer.encode(c.text).ids) for c in index.chunks))
        warm_med, warm_ts, _ = timed(lambda: (clear_memory_cache(), HistoryIndex.build(turns, emb, cache_dir=cache)), a.repeats)
        assert np.allclose(HistoryIndex.build(turns, emb, cache_dir=cache).vectors.vectors, index.vectors.vectors)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    cmd = f"iba index DATASET (bench/perf.py --only embed: {len(turns):,} turns of the full build)"
    rows.append(row(f"{len(turns):,}-turn history, cold: chunk + embed {len(index):,} windows of <=256 tokens "
                    f"({tokens:,} tokens), {emb.engine} engine, {emb.threads} threads",
                    f"**{cold:.0f} s** ({len(turns) / cold:.0f} turns/s, {tokens / cold:.0f} tokens/s)", "<= 70 s",
                    cold <= 70, cmd, "one run (the longest figure of the suite)"))
    rows.append(row(f"{len(turns):,}-turn history, index cache already has it", f"**{warm_med:.2f} s**", "<= 1 s",
                    warm_med <= 1, cmd, f"runs {fmt_times(warm_ts)} s"))
    return rows


def sec_build(a: argparse.Namespace) -> list[dict]:
    from build_time import timed_build  # bench/build_time.py: the build timed, its process tree's memory sampled

    runs = []
    for i in range(a.repeats):
        runs.append(timed_build(argparse.Namespace(preset="full", seed=42), a.work / "build-timed"))
        log(f"build {i + 1}/{a.repeats}: {runs[-1]['wall_s']:.1f} s, {runs[-1]['tree_pss_mb']:.0f} MB")
    shutil.rmtree(a.work / "build-timed", ignore_errors=True)
    walls = [r["wall_s"] for r in runs]
    pss = [r["tree_pss_mb"] for r in runs]
    med = statistics.median(walls)
    cmd = "python bench/build_time.py (/usr/bin/time -v iba build --preset full --seed 42 --out DIR --no-progress)"
    return [row("`iba build --preset full` (400 personas, 6,962 instances, 1.94 M turns)", f"**{med:.1f} s**", "<= 60 s",
                med <= 60, cmd, f"runs {fmt_times(walls)} s; CPU {statistics.median(r['cpu_s'] for r in runs):.0f} s"),
            row("peak memory of that build (summed PSS of its processes)", f"**{statistics.median(pss):.0f} MB**", "<= 800 MB",
                statistics.median(pss) <= 800, cmd, f"runs {', '.join(f'{x:.0f}' for x in pss)} MB")]


def instant_backend():
    """An in-process backend that answers at once with a schema-valid reply: the harness benchmark's
    stand-in for the model, so that what is timed is everything else."""
    from iba.llm.base import Backend, Completion

    sys.path.insert(0, str(ROOT / "bench"))
    from stub_server import fill

    class Instant(Backend):
        model_id = "instant"
        context_window = 8192

        async def complete(self, messages, *, max_tokens=512, temperature=0.0, seed=None, json_schema=None,
                           tools=None, tool_choice=None, stop=None):
            text = json.dumps(fill(json_schema)) if json_schema else "A short plan that follows the request."
            return Completion(text=text, prompt_tokens=100, completion_tokens=10, model="instant")

    return Instant()


def _harness_store(a: argparse.Namespace) -> tuple[Path, Path]:
    return ensure_build(a.work, "full"), a.work / "harness.sqlite"


def sec_harness(a: argparse.Namespace) -> list[dict]:
    from iba.dataset import Dataset
    from iba.run.runner import RunConfig, run_dataset
    from iba.run.store import Store

    root, store_path = _harness_store(a)
    ds = Dataset(root)
    agent = "direct?max_history_tokens=200"
    per, n = [], 0
    for i in range(a.repeats):
        store_path.unlink(missing_ok=True)
        cfg = RunConfig(agents=[agent], run="harness", limit=a.harness_limit, score=False, progress=False,
                        cache_dir=a.work / "harness-cache")
        with Store(store_path) as store:
            t0 = time.perf_counter()
            s = asyncio.run(run_dataset(ds, instant_backend(), store, cfg))
            wall = time.perf_counter() - t0
        n = s.planned
        per.append(wall / max(1, n) * 1000)
        log(f"harness {i + 1}/{a.repeats}: {n} instances in {wall:.1f} s ({per[-1]:.1f} ms each; {s.ok} ok, {s.failed} failed)")
    med = statistics.median(per)
    return [row(f"harness overhead per instance, instant in-process backend, agent `{agent}`, {n:,} instances "
                "(read + check the history, prompt, parse, store; no scoring)", f"**{med:.1f} ms**", "<= 20 ms",
                med <= 20, "bench/perf.py --only harness", f"runs {', '.join(f'{x:.1f}' for x in per)} ms")]


def sec_score(a: argparse.Namespace) -> list[dict]:
    root, store_path = _harness_store(a)
    if not store_path.exists():
        log("score needs the harness store: running the harness section once")
        sec_harness(argparse.Namespace(**{**vars(a), "repeats": 1}))
    walls, n = [], 0
    for i in range(a.repeats):
        copy = a.work / "score-copy.sqlite"
        shutil.copy(store_path, copy)
        cmd = [*IBA, "score", str(copy), "--dataset", str(root), "--judges", "none", "--quiet"]
        t0 = time.perf_counter()
        r = subprocess.run(cmd, capture_output=True, text=True, check=True)
        walls.append(time.perf_counter() - t0)
        m = re.search(r"(\d+) stored runs", r.stdout)
        n = int(m.group(1)) if m else 0
        log(f"score {i + 1}/{a.repeats}: {n} records in {walls[-1]:.1f} s")
        copy.unlink()
    med = statistics.median(walls)
    return [row(f"`iba score --judges none` over {n:,} stored records (API slots + verifiers; process start included)",
                f"**{med:.1f} s**", "<= 30 s", med <= 30, "iba score STORE --dataset DIR --judges none --quiet",
                f"runs {fmt_times(walls)} s")]


def sec_concurrency(a: argparse.Namespace) -> list[dict]:
    sys.path.insert(0, str(ROOT / "bench"))
    from stub_server import StubServer

    root = ensure_build(a.work, "small")
    limit = 66  # every instance of the small preset
    rows, rates = [], {}
    with StubServer(a.latency) as srv:
        base = [*IBA, "run", str(root), "--agent", "direct?max_history_tokens=200", "--model", "openai:stub",
                "--base-url", srv.url, "--judges", "none", "--quiet", "--limit", str(limit)]
        for n in (1, 8):
            walls, peaks = [], []
            for _ in range(a.repeats):
                store = a.work / f"conc-{n}.sqlite"
                store.unlink(missing_ok=True)
                srv.reset()
                t0 = time.perf_counter()
                subprocess.run([*base, "--no-cache", "--store", str(store), "--concurrency", str(n)], check=True,
                               capture_output=True, env={**os.environ, "OPENAI_API_KEY": "unused"})
                walls.append(time.perf_counter() - t0)
                peaks.append(srv.max_in_flight)
            rates[n] = limit / statistics.median(walls)
            rows.append(row(f"`iba run --concurrency {n}`, {limit} instances, server latency {a.latency:.2f} s",
                            f"**{rates[n]:.2f} instances/s**; most in flight at the server: {max(peaks)}",
                            f"in flight <= {n}", max(peaks) <= n,
                            f"iba run DATASET --model openai:stub --base-url URL --concurrency {n} --no-cache",
                            f"runs {fmt_times(walls)} s (process start included)"))
        ratio = rates[8] / rates[1]
        rows.append(row("throughput at N = 8 over N = 1", f"**{ratio:.1f}x**", ">= 3x", ratio >= 3, "the two rows above"))
        # the response cache: a second run into a new store asks the server nothing
        cache = a.work / "conc-cache"
        shutil.rmtree(cache, ignore_errors=True)
        counts = []
        for i, store_name in enumerate(("cache-a", "cache-b", "cache-b")):
            store = a.work / f"{store_name}.sqlite"
            if i < 2:
                store.unlink(missing_ok=True)
            srv.reset()
            subprocess.run([*base, "--cache-dir", str(cache), "--store", str(store), "--concurrency", "8"], check=True,
                           capture_output=True, env={**os.environ, "OPENAI_API_KEY": "unused"})
            counts.append(srv.requests)
        rows.append(row("model requests: first run / same run into a new store (response cache) / rerun of a finished run",
                        f"**{counts[0]} / {counts[1]} / {counts[2]}**", "rerun: 0", counts[1] == 0 and counts[2] == 0,
                        "iba run DATASET ... --cache-dir C (twice)", "counted at the server"))
    return rows


def sec_scaleout(a: argparse.Namespace) -> list[dict]:
    """Each server serves one request at a time for --latency s: the instance rate of one server is
    1/latency at best, whatever the client does; two servers double it, more client processes do not."""
    import importlib.util

    sys.path.insert(0, str(ROOT / "bench"))
    from stub_server import StubServer

    root = ensure_build(a.work, "small")
    limit = 40  # 20 s per run at one server's bound: enough to read a steady rate, short enough to repeat
    env = {**os.environ, "OPENAI_API_KEY": "unused", "RAY_USAGE_STATS_ENABLED": "0"}
    configs = [("local executor, 1 server", "local", 1), ("local executor, 2 servers", "local", 2)]
    if importlib.util.find_spec("ray") is not None:
        configs += [("Ray, 2 workers, 1 server", "ray", 1), ("Ray, 2 workers, 2 servers", "ray", 2)]
    rows, rates = [], {}

    def one_run(executor: str, servers: list, n: int) -> float:
        store = a.work / "scaleout.sqlite"
        store.unlink(missing_ok=True)
        urls = [x for srv in servers for x in ("--base-url", srv.url)]
        cmd = [*IBA, "run", str(root), "--agent", "direct?max_history_tokens=200", "--model", "openai:stub", *urls,
               "--judges", "none", "--quiet", "--limit", str(n), "--no-cache", "--store", str(store), "--concurrency", "4"]
        if executor == "ray":
            cmd += ["--executor", "ray", "--workers", "2"]
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True, env=env)
        return time.perf_counter() - t0

    with StubServer(a.latency, slots=1) as s1, StubServer(a.latency, slots=1) as s2:
        for label, executor, n_servers in configs:
            servers = [s1, s2][:n_servers]
            walls, fixed, served = [], [], ""
            for _ in range(a.repeats):
                # the fixed cost (process start, Ray start, worker start) from a 2-instance run, so the
                # rate is the steady one: (limit - 2) / (wall(limit) - wall(2))
                fixed.append(one_run(executor, servers, 2))
                for srv in servers:
                    srv.reset()
                walls.append(one_run(executor, servers, limit))
                served = "/".join(str(srv.requests) for srv in servers)
            wall, start = statistics.median(walls), statistics.median(fixed)
            rates[label] = (limit - 2) / max(1e-9, wall - start)
            rows.append(row(f"{label}, --concurrency 4, {limit} instances, {a.latency:.2f} s per request, one slot per server",
                            f"**{rates[label]:.2f} instances/s** steady; {limit / wall:.2f}/s with start-up",
                            "", None,
                            "iba run DATASET --model openai:stub " + " ".join("--base-url URL" for _ in servers)
                            + (" --executor ray --workers 2" if executor == "ray" else "") + " --concurrency 4",
                            f"wall {fmt_times(walls)} s, start-up (2-instance run) {fmt_times(fixed)} s; "
                            f"requests per server {served}"))
    base = rates["local executor, 1 server"]
    for label, r in rates.items():
        if label != "local executor, 1 server":
            rows.append(row(f"ratio: {label} / local executor, 1 server (steady rates)", f"**{r / base:.2f}x**",
                            "2 servers: ~2x; more client workers on one server: ~1x", None, "the rows above"))
    rows += _projection(a)
    return rows


def _ok_records(store: Path) -> list[tuple[str, dict]]:
    """(agent spec, record) of every ok record in the agent benchmark's store, read-only."""
    import sqlite3

    con = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        return [(agent, json.loads(rec)) for agent, rec in con.execute("select agent, record from runs where status = 'ok'")]
    finally:
        con.close()


def _projection(a: argparse.Namespace) -> list[dict]:
    """Full-benchmark wall time on N replicas from measured seconds per action: the agent
    benchmark's stored latencies (one replica = one embedded 1.5B on one CPU core)."""
    from iba.dataset import Dataset

    if not a.agents_store.exists():
        return [row("projected full-benchmark wall time", "not computed", "on paper", None, "python bench/agents.py",
                    f"no store at {a.agents_store} to take seconds per action from")]
    n_inst = len(Dataset(ensure_build(a.work, "full")).instances)
    lat: dict[str, list[float]] = {}
    for agent, r in _ok_records(a.agents_store):
        if "::qa::" not in r["instance_id"]:
            lat.setdefault(agent, []).append(r["latency_s"])
    rows = []
    for agent, xs in sorted(lat.items()):
        per = statistics.median(xs)
        cells = ", ".join(f"{n}: {n_inst * per / n / 3600:.1f} h" for n in (1, 8, 64))
        rows.append(row(f"projected: {n_inst:,} instances x `{agent}` at {per:.0f} s per action (median of {len(xs)} "
                        "measured, 1.5B embedded, one CPU core per replica)", cells, "on paper", None,
                        "instances x s per action / replicas",
                        "linear in replicas, as the 2-server ratio above shows for a server-bound run; a GPU server's "
                        "seconds per action at its batch size replace the CPU figure"))
    return rows


def sec_model(a: argparse.Namespace) -> list[dict]:
    rows = []
    for model in [m.strip() for m in a.models.split(",") if m.strip()]:
        cmd = [sys.executable, "-m", "iba.llm.speed", "--model", model, "--prompt-tokens", "512", "--gen-tokens", "64"]
        prompt, gen = [], []
        for _ in range(a.repeats):
            r = subprocess.run(cmd, capture_output=True, text=True)
            m = re.search(r"prompt eval (\d+) tok/s.*generation ([\d.]+) tok/s", r.stdout)
            if not m:
                rows.append(row(f"{model} speed", "not measured", "reported", None, shlex.join(cmd[1:]),
                                (r.stderr or r.stdout).strip().splitlines()[-1][:200] if (r.stderr or r.stdout) else ""))
                break
            prompt.append(float(m.group(1)))
            gen.append(float(m.group(2)))
        if prompt:
            rows.append(row(f"{model}: prompt eval / decode, 512-token prompt, default threads",
                            f"**{statistics.median(prompt):.0f} / {statistics.median(gen):.1f} tok/s**", "reported", None,
                            "python " + shlex.join(cmd[1:]),
                            "runs " + ", ".join(f"{p:.0f}/{g:.1f}" for p, g in zip(prompt, gen))))
    return rows


def sec_effort(a: argparse.Namespace) -> list[dict]:
    """Per action, from each given agent store: calls, tokens (and the prompt tokens the model did
    not evaluate again), seconds, and the deterministic task score beside them (agent_cost.py)."""
    from agent_cost import cost, read_column

    rows = []
    for store in a.agents_stores:
        if not Path(store).exists():
            rows.append(row("agent effort", "not measured", "reported", None, "python bench/agents.py", f"no store at {store}"))
            continue
        for name, recs in read_column(str(store)).items():
            cs = [cost(e) for e in recs.values()]
            med = {k: statistics.median(c[k] for c in cs) for k in ("calls", "prompt", "reused", "completion", "wall_s")}
            scored = [c["score"] for c in cs if c["score"] is not None]
            score = f"slot score {100 * statistics.mean(scored):.1f} (n={len(scored)})" if scored else "no slot scores"
            rows.append(row(f"`{name.split(':', 1)[1]}` per task action (median over {len(cs)}; store {Path(store).parent.name if Path(store).is_file() else Path(store).name})",
                            f"**{med['calls']:.0f} calls, {med['prompt']:.0f} prompt (of them {med['reused']:.0f} reused) + "
                            f"{med['completion']:.0f} completion tokens, {med['wall_s']:.0f} s**",
                            "reported, beside the score", None, "python bench/agents.py (the store it fills)", score))
    return rows


# --------------------------------------------------------------------------- output


def machine() -> str:
    load = os.getloadavg()[0]
    return f"{len(os.sched_getaffinity(0))} cores, load average {load:.1f} when the section ended, {time.strftime('%Y-%m-%d')}"


def render(results: dict[str, Any]) -> str:
    lines = [BEGIN, "", "Written by `python bench/perf.py` (`make bench`); a section's rows are from its last run.", ""]
    for sec in SECTIONS:
        if sec not in results:
            continue
        entry = results[sec]
        lines += [f"**{sec}** ({entry['machine']}; section took {entry['seconds']:.0f} s)", "",
                  "| figure | measured | target | met | command | runs / note |", "|---|---|---|---|---|---|"]
        for r in entry["rows"]:
            met = "" if r["met"] is None else ("yes" if r["met"] else "**no**")
            cmd = f"`{r['command']}`" if r["command"] else ""
            lines.append(f"| {r['figure']} | {r['value']} | {r['target']} | {met} | {cmd} | {r['note']} |")
        lines.append("")
    lines.append(END)
    return "\n".join(lines)


def write(results: dict[str, Any]) -> None:
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    tmp = RESULTS.with_suffix(".tmp")
    tmp.write_text(json.dumps(results, indent=1) + "\n")
    os.replace(tmp, RESULTS)
    replace_block(BENCHMARKS, BEGIN, END, render(results), "## Performance suite (issue 10)")


def replace_block(path: Path, begin: str, end: str, block: str, heading: str) -> None:
    """Put `block` (which starts with `begin` and ends with `end`) in place of the file's block between
    those markers, or at the end under `heading` if it has none; written to a temp file, then renamed."""
    text = path.read_text()
    if begin in text and end in text:
        text = text[: text.index(begin)] + block + text[text.index(end) + len(end):]
    else:
        text = text.rstrip() + f"\n\n{heading}\n\n" + block + "\n"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    a.work.mkdir(parents=True, exist_ok=True)
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    t_all = time.monotonic()
    for sec in a.only:
        log(f"section {sec}")
        t0 = time.monotonic()
        rows = globals()[f"sec_{sec}"](a)
        results[sec] = {"rows": rows, "seconds": time.monotonic() - t0, "machine": machine()}
        for r in rows:
            print(f"{sec}: {r['figure']}: {r['value']} (target {r['target'] or '-'})", flush=True)
        if not a.no_write:
            write(results)  # after each section, so a stopped suite keeps what it measured
    log(f"done in {time.monotonic() - t_all:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
