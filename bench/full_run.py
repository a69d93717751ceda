"""Time to a full result (issue 33): indexing throughput and the harness's own time, measured on this
box, and the projected wall time of the whole benchmark (6,962 instances) for `rag` and the 3-call `iba`.

  python bench/full_run.py                   # every step; resumable: a rerun skips the steps already done
  python bench/full_run.py --fresh           # measure everything again (say so on an idle machine)
  python bench/full_run.py --only project    # recompute the projection from the stored figures

Steps (each prints what it runs, its estimate and the ETA of the whole; `iba index` and the runner show
their own progress bars):
  index    a seeded sample of full-preset users (--users) indexed as `iba index` does (mixed units: the
           256-token windows rag reads plus the user turns iba reads): in this process's way, the packaged
           MiniLM (onnx) in `iba index`, and through 1, 2 and 4 local `iba serve-embeddings` with
           `iba index --embedder openai:minilm`. Per run: wall, turns/s, and the CPU seconds of the client
           (`iba index`) and of the servers (/proc), from which the throughput of one server on a box of
           its own and of one client box are projected (CPU-bound work; the formula is in the output).
  harness  the runner (`iba run`'s code, scoring included, judges none) on that sample's instances,
           against bench/stub_server.py (--latency seconds per call), for `direct` (the harness alone: no
           retrieval), `rag` and the 3-call iba. CPU per instance: each instance once (a user's history
           parse and index load spread over its tasks, as in a full run); the run's one-off parse of the
           whole answer key, process start and the first run's lazy imports are fixed costs, measured
           apart or outside the measure. Throughput: x --trials at concurrency 8, 32 and 128, instances/s beside the ideal
           C / (calls x latency).
  project  the formula, its measured terms and the projected wall time for this box alone, this box +
           N embedding servers, and a Ray cluster of K boxes.

Results: bench/results/full_run.json (written after every step: the resume point). The block between the
full-run markers of bench/BENCHMARKS.md is rewritten from it; every figure carries the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "full_run.json"
BENCHMARKS = ROOT / "bench" / "BENCHMARKS.md"
BEGIN, END = "<!-- full-run:begin (bench/full_run.py rewrites this block) -->", "<!-- full-run:end -->"
IBA = [sys.executable, "-m", "iba.cli"]
# the pure harness (no retrieval: the runner, HTTP, store, scoring), rag, and the 3-call model-free iba
AGENTS = {"direct": ("direct?max_history_tokens=200", 1), "rag": ("rag", 1),
          "iba3": ("iba?expansion=template&reranker=rules&compact=none", 3)}
PROJECTED = ("rag", "iba3")
# the same agents with their query embeddings on an `iba serve-embeddings` (--embedder openai:minilm): the
# run box's own CPU when an embedding service does the embedding
VARIANTS = {"rag-svc": "rag", "iba3-svc": "iba3"}
SERVERS = (1, 2, 4)
CONCURRENCY = (8, 32, 128)
SECTIONS = ("index", "harness", "project")
FULL_INSTANCES = 6962
TICK = os.sysconf("SC_CLK_TCK")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", type=Path, default=None,
                   help="a `--preset full` build (default: WORK/iba-full, built with --seed 42 when missing, ~2 min)")
    p.add_argument("--work", type=Path, default=ROOT / "runs" / "bench-full-run", help="scratch (default: runs/bench-full-run)")
    p.add_argument("--only", default=",".join(SECTIONS), help=f"comma-separated sections (default: {','.join(SECTIONS)})")
    p.add_argument("--users", type=int, default=2, help="users in the indexing sample (default 2, ~9,000 turns)")
    p.add_argument("--seed", type=int, default=42, help="sample seed, as `iba index --users N --seed S` (default 42)")
    p.add_argument("--repeats", type=int, default=3, help="runs per figure, median reported (default 3)")
    p.add_argument("--trials", type=int, default=4, help="harness: trials per instance, for enough items in flight (default 4)")
    p.add_argument("--latency", type=float, default=0.5, help="harness: stub seconds per model call (default 0.5)")
    p.add_argument("--fresh", action="store_true", help="forget stored figures of the chosen sections and measure again")
    p.add_argument("--results", type=Path, default=RESULTS, help="the figures, the resume point (default: bench/results/full_run.json)")
    p.add_argument("--no-write", action="store_true", help="do not touch BENCHMARKS.md")
    p.add_argument("--harness-child", default=None, help=argparse.SUPPRESS)  # internal: one harness run
    a = p.parse_args(argv)
    a.only = [s.strip() for s in a.only.split(",") if s.strip()]
    bad = [s for s in a.only if s not in SECTIONS]
    if bad:
        p.error(f"--only: unknown section(s) {', '.join(bad)}; choose from {', '.join(SECTIONS)}")
    for name in ("users", "repeats", "trials"):
        if getattr(a, name) < 1:
            p.error(f"--{name} must be >= 1")
    a.dataset = a.dataset or a.work / "iba-full"
    return a


def log(msg: str) -> None:
    print(f"[full-run {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def load_results(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text()) if path.exists() else {}


def save(results: dict[str, Any]) -> None:
    path = Path(results["_path"])
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({k: v for k, v in results.items() if k != "_path"}, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, path)


def load_note() -> dict[str, Any]:
    return {"load1": round(os.getloadavg()[0], 2), "cores": len(os.sched_getaffinity(0)), "date": time.strftime("%Y-%m-%d %H:%M")}


# --------------------------------------------------------------------------- processes


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proc_cpu(pid: int) -> float:
    """User + system CPU seconds of a live process (/proc/PID/stat fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


class Servers:
    """N `iba serve-embeddings` processes (the packaged MiniLM), `threads` each, on free ports."""

    def __init__(self, n: int, threads: int, logdir: Path) -> None:
        self.procs: list[subprocess.Popen] = []
        self.urls: list[str] = []
        logdir.mkdir(parents=True, exist_ok=True)
        for _ in range(n):
            port = free_port()
            log_file = open(logdir / f"serve-{port}.log", "wb")  # noqa: SIM115 - closed with the process
            self.procs.append(subprocess.Popen(
                [*IBA, "serve-embeddings", "--embedder", f"minilm?threads={threads}", "--port", str(port)],
                stdout=log_file, stderr=subprocess.STDOUT))
            self.urls.append(f"http://127.0.0.1:{port}/v1")
        deadline = time.monotonic() + 180
        for proc, url in zip(self.procs, self.urls):
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(f"iba serve-embeddings exited with {proc.returncode} (logs in {logdir})")
                try:
                    with urllib.request.urlopen(f"{url}/models", timeout=2):
                        break
                except OSError:
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"iba serve-embeddings at {url} did not answer in 180 s") from None
                    time.sleep(0.3)

    def cpu(self) -> float:
        return sum(proc_cpu(p.pid) for p in self.procs)

    def close(self) -> None:
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


# --------------------------------------------------------------------------- the dataset and its sample


def ensure_dataset(a: argparse.Namespace) -> Path:
    if not (a.dataset / "manifest.json").exists():
        log(f"building --preset full --seed 42 into {a.dataset} (about 2 minutes idle)")
        subprocess.run([*IBA, "build", "--preset", "full", "--seed", "42", "--out", str(a.dataset), "--no-progress"],
                       check=True, stdout=subprocess.DEVNULL)
    return a.dataset


def count_turns(path: Path) -> int:
    with open(path, "rb") as f:
        return sum(1 for line in f if line.strip())


def sample(a: argparse.Namespace) -> dict[str, Any]:
    """The users `iba index --users N --seed S` takes, their instances and turns, and the full build's totals."""
    from iba.dataset import Dataset
    from iba.retrieval.evaluate import sample_users

    ds = Dataset(ensure_dataset(a))
    instances = list(ds.instances)
    chosen = sample_users(instances, a.users, a.seed)
    users = list(dict.fromkeys(t.user_id for t in chosen))
    all_users = list(dict.fromkeys(t.user_id for t in instances))
    return {"users": users, "instance_ids": [t.instance_id for t in chosen],
            "turns": sum(count_turns(ds.history_path(u)) for u in users),
            "full_turns": sum(count_turns(ds.history_path(u)) for u in all_users),
            "full_instances": len(instances), "full_users": len(all_users)}


# --------------------------------------------------------------------------- steps


def index_step(a: argparse.Namespace, info: dict[str, Any], servers: int) -> dict[str, Any]:
    """One `iba index` of the sample into a fresh cache: in process (servers=0) or through N servers."""
    cores = len(os.sched_getaffinity(0))
    cache = a.work / ("cache-inproc" if servers == 0 else f"cache-servers-{servers}")
    subprocess.run(["rm", "-rf", str(cache)], check=True)
    cmd = [*IBA, "index", str(a.dataset), "--users", str(a.users), "--seed", str(a.seed), "--cache-dir", str(cache),
           "--unit", "mixed"]
    srv = None
    if servers:
        # a server per core at most: more threads than cores only queue (4 servers share 2 cores here)
        srv = Servers(servers, max(1, cores // servers), a.work / "logs")
        cmd += ["--embedder", "openai:minilm", *[x for u in srv.urls for x in ("--embed-base-url", u)]]
    try:
        cpu0, scpu0 = children_cpu(), srv.cpu() if srv else 0.0
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        wall = time.perf_counter() - t0
        client_cpu = children_cpu() - cpu0
        server_cpu = (srv.cpu() - scpu0) if srv else 0.0
    finally:
        if srv:
            srv.close()
    turns = info["turns"]
    return {"wall_s": wall, "turns": turns, "turns_per_s": turns / wall, "client_cpu_s": client_cpu,
            "server_cpu_s": server_cpu, "servers": servers, "command": " ".join(cmd[2:]), **load_note()}


def harness_child(spec_json: str) -> int:
    """One harness run in this (child) process: the runner as `iba run` drives it, on given instance ids.
    Prints its CPU seconds (every thread) for the run alone, and for the answer key's parse within it."""
    from iba.dataset import Dataset
    from iba.retrieval.embed import get_embedder
    from iba.taxonomy import scenario_api

    def cpu() -> float:
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime

    spec = json.loads(spec_json)
    ds = Dataset(spec["dataset"])
    # once per process, outside the measure: the query embedder's weights, the taxonomy, the instances,
    # the agent's modules, and a `direct` run of one instance of a user outside the sample (lazy imports
    # of the HTTP client, the runner's and scorers' first calls, the store's schema; `direct` so that no
    # history is embedded for it): process start is no per-instance cost
    import bm25s  # noqa: F401 - imported by the first BM25 index (iba's hybrid search)

    from iba.agents.base import AgentEnv
    from iba.run.runner import make_agent

    embedder = _embedder(spec)
    get_embedder(embedder).encode(["warm up"])
    scenario_api("food_ordering")
    make_agent(spec["agent"], AgentEnv(backend=None, cache_dir=Path(spec["cache"])), ())  # type: ignore[arg-type]
    users = {t.user_id for t in ds.instances if t.instance_id in set(spec["ids"])}
    other = next(t.instance_id for t in ds.instances if t.user_id not in users)
    warm = dict(spec, agent=AGENTS["direct"][0], ids=[other], trials=1, store=spec["store"] + ".warm", concurrency=1)
    _run_once(ds, warm, cpu)
    c0 = cpu()
    # a run parses the whole answer key once: a fixed cost (spread over 6,962 in a full run), timed here and
    # handed to the run parsed, since its noise would swamp the per-instance figure of a small sample
    keys = ds.answer_keys()
    keys_cpu = cpu() - c0
    ds.answer_keys = lambda: keys  # type: ignore[method-assign]
    s, run_cpu, wall = _run_once(ds, spec, cpu)
    print(json.dumps({"planned": s.planned, "ok": s.ok, "failed": s.failed, "errored": s.errored,
                      "calls": s.usage.llm_calls, "errors": s.errors[:3], "run_cpu_s": run_cpu,
                      "keys_cpu_s": keys_cpu, "run_wall_s": wall}))
    return 0


def _embedder(spec: dict[str, Any]) -> str:
    from iba.retrieval.embed import EmbedderSpec

    return EmbedderSpec("openai:minilm", base_url=[spec["embed_url"]]) if spec.get("embed_url") else "minilm"


def _run_once(ds: Any, spec: dict[str, Any], cpu: Callable[[], float]) -> tuple[Any, float, float]:
    """run_dataset over spec's instances into a fresh store: (summary, CPU seconds, wall seconds)."""
    import asyncio

    from iba.llm import resolve_backend
    from iba.run.runner import RunConfig, run_dataset
    from iba.run.store import Store

    backend = resolve_backend("openai:stub", base_url=spec["url"], use_cache=False,
                              max_in_flight_per_endpoint=spec["concurrency"])
    cfg = RunConfig(agents=[spec["agent"]], run="harness", trials=spec["trials"], concurrency=spec["concurrency"],
                    instance_ids=spec["ids"], cache_dir=Path(spec["cache"]), score=True, embedder=_embedder(spec),
                    progress=len(spec["ids"]) > 1)
    Path(spec["store"]).unlink(missing_ok=True)
    with Store(Path(spec["store"])) as store:
        c0, t0 = cpu(), time.perf_counter()
        s = asyncio.run(run_dataset(ds, backend, store, cfg))
        return s, cpu() - c0, time.perf_counter() - t0


def harness_step(a: argparse.Namespace, name: str, concurrency: int, ids: list[str], url: str,
                 trials: int) -> dict[str, Any]:
    spec, calls = AGENTS[VARIANTS.get(name, name)]
    service = name in VARIANTS
    child = {"url": url, "agent": spec, "concurrency": concurrency, "trials": trials, "ids": ids,
             "cache": str(a.work / ("cache-servers-1" if service else "cache-inproc")),
             "embed_url": a.embed_url if service else None,
             "store": str(a.work / "harness.sqlite"), "dataset": str(a.dataset)}
    r = subprocess.run([sys.executable, __file__, "--harness-child", json.dumps(child)], check=True,
                       stdout=subprocess.PIPE, text=True)
    out = json.loads(r.stdout.strip().splitlines()[-1])
    if out["ok"] != out["planned"]:
        raise RuntimeError(f"harness run {name} C={concurrency}: not every item ok: {out}")
    return {"wall_s": out["run_wall_s"], "cpu_s": out["run_cpu_s"], "keys_cpu_s": out["keys_cpu_s"],
            "items": out["planned"], "calls": out["calls"], "agent": spec, "calls_per_item": calls,
            "concurrency": concurrency, "trials": trials, "latency_s": a.latency, **load_note()}


# --------------------------------------------------------------------------- the plan, resumable


def plan(a: argparse.Namespace) -> list[tuple[str, str, Callable[..., dict[str, Any]], float]]:
    """(section, step id, run, estimated seconds) in order."""
    steps: list[tuple[str, str, Callable[..., dict[str, Any]], float]] = []
    info = a.info
    turns = info["turns"]
    if "index" in a.only:
        for r in range(a.repeats):
            steps.append(("index", f"index/inproc/r{r}", lambda r=r: index_step(a, info, 0), turns / 100 + 15))
            for n in SERVERS:
                steps.append(("index", f"index/servers-{n}/r{r}", lambda n=n: index_step(a, info, n), turns / 80 + 25))
    if "harness" in a.only:
        ids = info["instance_ids"]
        for name, agent in VARIANTS.items():
            for r in range(a.repeats):
                steps.append(("harness", f"harness/{name}/t1/r{r}",
                              lambda name=name: harness_step(a, name, 32, ids, a.url, 1), 20 + len(ids) * 0.3))
        for agent, (_spec, calls) in AGENTS.items():
            cpu_guess = {"direct": 0.03, "rag": 0.05, "iba3": 0.5}[agent]
            for r in range(a.repeats):
                steps.append(("harness", f"harness/{agent}/t1/r{r}",
                              lambda agent=agent: harness_step(a, agent, 32, ids, a.url, 1),
                              20 + len(ids) * (cpu_guess + calls * a.latency / 32)))
                for c in CONCURRENCY:
                    n = len(ids) * a.trials
                    est = 20 + n * calls * a.latency / c + n * cpu_guess
                    steps.append(("harness", f"harness/{agent}/c{c}/r{r}",
                                  lambda agent=agent, c=c: harness_step(a, agent, c, ids, a.url, a.trials), est))
    return steps


def run_plan(a: argparse.Namespace, results: dict[str, Any]) -> None:
    steps = [s for s in plan(a) if s[1] not in results.get("steps", {})]
    if not steps:
        return
    remaining = sum(s[3] for s in steps)
    total = len(steps)
    t_start = time.monotonic()
    for i, (section, step_id, fn, est) in enumerate(steps, start=1):
        done_at = time.strftime("%H:%M", time.localtime(time.time() + remaining))
        log(f"step {i}/{total} {step_id} (estimate {est:.0f} s; all remaining ~{remaining / 60:.0f} min, done ~{done_at})")
        t0 = time.monotonic()
        res = fn()
        took = time.monotonic() - t0
        results.setdefault("steps", {})[step_id] = res
        save(results)
        log(f"step {i}/{total} {step_id}: {took:.0f} s; {json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in res.items() if k != 'command'})}")
        # the rest's estimates, scaled by how the steps so far compared with theirs (a loaded machine)
        ratio = (time.monotonic() - t_start) / max(1.0, sum(s[3] for s in steps[:i]))
        remaining = sum(s[3] for s in steps[i:]) * max(0.5, min(10.0, ratio))


# --------------------------------------------------------------------------- the projection


def median_of(results: dict[str, Any], prefix: str, key: str | Callable[[dict], float]) -> float | None:
    rows = [v for k, v in results.get("steps", {}).items() if k.rsplit("/", 1)[0] == prefix]
    if not rows:
        return None
    return statistics.median(key(r) if callable(key) else r[key] for r in rows)


def terms(results: dict[str, Any]) -> dict[str, Any]:
    """The measured terms of the projection (medians over repeats)."""
    info = results["sample"]
    cores = results.get("cores", 2)
    t: dict[str, Any] = {"full_turns": info["full_turns"], "full_instances": info["full_instances"], "cores": cores}
    inproc = median_of(results, "index/inproc", lambda r: r["client_cpu_s"] / r["turns"])
    if inproc:
        # turns/s of `iba index` with the in-process MiniLM on this box, from its CPU seconds per turn: the
        # work is CPU-bound, and on a shared box the wall time says more about the neighbours
        t["inproc_cpu_per_turn"] = inproc
        t["r_inproc"] = cores / inproc
        t["r_inproc_wall"] = median_of(results, "index/inproc", "turns_per_s")
    for n in SERVERS:
        rate = median_of(results, f"index/servers-{n}", "turns_per_s")
        if rate:
            t[f"r_servers_{n}_here"] = rate  # measured wall rate, client and N servers on this box's cores
    one = [v for k, v in results.get("steps", {}).items() if k.startswith("index/servers-")]
    if one:
        # CPU per turn of serving and of the client, over every server configuration
        t["server_cpu_per_turn"] = statistics.median(r["server_cpu_s"] / r["turns"] for r in one)
        t["client_cpu_per_turn"] = statistics.median(r["client_cpu_s"] / r["turns"] for r in one)
        t["r_server_box"] = cores / t["server_cpu_per_turn"]  # one server owning a box of `cores` cores
        t["r_client_box"] = cores / t["client_cpu_per_turn"]  # the client (chunking, HTTP) on this box
    for agent in [*AGENTS, *VARIANTS]:
        entry: dict[str, Any] = {}
        once = median_of(results, f"harness/{agent}/t1", lambda r: r["cpu_s"] / r["items"])
        if once is not None:
            entry["cpu_ms"] = once * 1000  # CPU per instance, each instance once (a full run's amortisation)
            entry["load"] = median_of(results, f"harness/{agent}/t1", "load1")
        per = {}
        for c in CONCURRENCY:
            rows = [v for k, v in results.get("steps", {}).items() if k.rsplit("/", 1)[0] == f"harness/{agent}/c{c}"]
            if rows:
                per[c] = {
                    "cpu_ms": statistics.median(r["cpu_s"] / r["items"] * 1000 for r in rows),
                    "rate": statistics.median(r["items"] / r["wall_s"] for r in rows),
                    "ideal": c / (AGENTS[VARIANTS.get(agent, agent)][1] * rows[0]["latency_s"]),
                    "items": rows[0]["items"], "latency_s": rows[0]["latency_s"],
                    "walls": [round(r["wall_s"], 1) for r in rows], "load": max(r["load1"] for r in rows),
                }
        if per:
            entry["by_concurrency"] = per
        if entry:
            t[f"harness_{agent}"] = entry
    return t


def projection(t: dict[str, Any]) -> list[dict[str, Any]]:
    """Projected wall time of the full benchmark: T = T_index + T_run, with
         T_index = turns / R_index
         T_run   = instances x max(calls x L / (C x boxes), c_agent / (cores x boxes))
    where c_agent is the run box's CPU per instance: with the query embeddings in process, or on the
    embedding servers when there are some (the -svc harness rows)."""
    rows = []
    turns, n, cores = t["full_turns"], t["full_instances"], t["cores"]
    latency, conc = 0.5, 128

    def cpu(name: str) -> float | None:
        ms = t.get(f"harness_{name}", {}).get("cpu_ms")
        return ms / 1000 if ms is not None else None

    for agent in PROJECTED:
        spec, calls = AGENTS[agent]
        service = next((v for v, base in VARIANTS.items() if base == agent), agent)
        settings: list[tuple[str, float | None, int, float | None]] = [
            ("this box alone (`iba index`, in-process MiniLM)", t.get("r_inproc"), 1, cpu(agent))]
        if "r_server_box" in t:
            for s in SERVERS:
                rate = min(s * t["r_server_box"], t["r_client_box"])
                settings.append((f"this box + {s} embedding server box{'es' if s > 1 else ''}", rate, 1, cpu(service)))
        if t.get("r_inproc"):
            for k in (2, 4, 8):
                settings.append((f"Ray cluster of {k} boxes (each indexing in process)", k * t["r_inproc"], k, cpu(agent)))
        for label, r_index, boxes, c_agent in settings:
            if not r_index:
                continue
            t_index = turns / r_index
            t_model = n * calls * latency / (conc * boxes)
            t_cpu = n * c_agent / (cores * boxes) if c_agent is not None else None
            t_run = max(t_model, t_cpu or 0.0)
            rows.append({"agent": spec, "setting": label, "t_index_h": t_index / 3600, "t_run_h": t_run / 3600,
                         "t_total_h": (t_index + t_run) / 3600,
                         "bound": "the run box's CPU" if (t_cpu or 0) > t_model else "the model"})
    return rows


def render(results: dict[str, Any]) -> str:
    t = terms(results)
    info = results["sample"]
    steps = results.get("steps", {})
    loads = [v["load1"] for v in steps.values()]
    under = f"measured under load (load average {min(loads):.1f}–{max(loads):.1f} on {t['cores']} cores)" if loads else ""
    lines = [BEGIN, "", f"Written by `python bench/full_run.py` (resumable; `--fresh` to measure again). Sample: "
             f"{len(info['users'])} users of the full build (seed {results.get('seed')}), {info['turns']:,} turns, "
             f"{len(info['instance_ids'])} instances; full build: {info['full_users']} users, {info['full_turns']:,} turns, "
             f"{info['full_instances']:,} instances. Medians of {results.get('repeats')} run(s); {under}.", ""]
    lines += ["**Indexing** (`iba index --unit mixed`: 256-token windows + user turns)", "",
              "| configuration | turns/s (wall, this box) | client CPU ms/turn | server CPU ms/turn | runs (s) |", "|---|---|---|---|---|"]
    for label, prefix in [("in process, packaged MiniLM (onnx), 2 threads", "index/inproc")] + [
            (f"{n} local `iba serve-embeddings` ({'2 threads' if n == 1 else '1 thread each'}), `--embedder openai:minilm`",
             f"index/servers-{n}") for n in SERVERS]:
        rows = [v for k, v in steps.items() if k.rsplit("/", 1)[0] == prefix]
        if not rows:
            continue
        rate = statistics.median(r["turns_per_s"] for r in rows)
        ccpu = statistics.median(r["client_cpu_s"] / r["turns"] * 1000 for r in rows)
        scpu = statistics.median(r["server_cpu_s"] / r["turns"] * 1000 for r in rows) if rows[0]["servers"] else None
        lines.append(f"| {label} | **{rate:.0f}** | {ccpu:.2f} | {'' if scpu is None else f'{scpu:.2f}'} | "
                     f"{', '.join(format(r['wall_s'], '.0f') for r in rows)} |")
    if "r_inproc" in t:
        lines += ["", f"In process on a {t['cores']}-core box: {t['cores']} / {t['inproc_cpu_per_turn'] * 1000:.2f} ms "
                  f"= **{t['r_inproc']:.0f} turns/s**."]
    if "r_server_box" in t:
        lines += ["", f"One server on a {t['cores']}-core box of its own: {t['cores']} / {t['server_cpu_per_turn'] * 1000:.2f} ms "
                  f"= **{t['r_server_box']:.0f} turns/s**; the client (`iba index`: chunking, HTTP) on this box: "
                  f"{t['cores']} / {t['client_cpu_per_turn'] * 1000:.2f} ms = **{t['r_client_box']:.0f} turns/s**. "
                  "(CPU-bound work: a server's CPU seconds per turn, spread over its box's cores; servers sharing "
                  "this box's 2 cores cannot show it in wall time.)"]
    lines += ["", f"**Harness** (the runner on the sample's instances against `bench/stub_server.py`, {results['settings']['latency']} s "
              "a call, judges none: CPU of the run's process per instance, each instance once; throughput with "
              f"x{results['settings']['trials']} trials)", "",
              "| agent | CPU ms / instance | concurrency: instances/s (ideal C / (calls x L)) | runs (s) | load |",
              "|---|---|---|---|---|"]
    labels = {name: f"`{spec}`" for name, (spec, _calls) in AGENTS.items()}
    labels.update({v: f"`{AGENTS[base][0]}`, its query embeddings on an `iba serve-embeddings`" for v, base in VARIANTS.items()})
    for agent, label in labels.items():
        h = t.get(f"harness_{agent}", {})
        if not h:
            continue
        per = h.get("by_concurrency", {})
        rates = "; ".join(f"{c}: **{v['rate']:.1f}** ({v['ideal']:.0f})" for c, v in sorted(per.items()))
        walls = "; ".join(", ".join(map(str, v["walls"])) for _, v in sorted(per.items()))
        load = max([v["load"] for v in per.values()] + [h.get("load", 0.0)])
        cpu = f"**{h['cpu_ms']:.1f}**" if "cpu_ms" in h else ""
        lines.append(f"| {label} | {cpu} | {rates} | {walls} | {load:.1f} |")
    proj = projection(t) if t.get("r_inproc") else []
    if proj:
        direct = t.get("harness_direct", {}).get("cpu_ms")
        driver = (f" A Ray driver stores and scores every record itself: at most {t['cores']} / {direct:.1f} ms = "
                  f"{t['cores'] / direct * 1000:.0f} instances/s (the `direct` row, an upper bound of that work)."
                  if direct else "")
        lines += ["", f"**Projected full run** ({t['full_instances']:,} instances, {t['full_turns']:,} turns), from the CPU "
                  "seconds per unit of work above (CPU-bound work; wall times on this shared box are longer): "
                  "T = turns / R_index + instances x max(calls x L / C, c_agent / cores), with L = 0.5 s per model "
                  "call and C = 128 calls in flight per box (a hosted model's figures replace these), c_agent the "
                  "CPU per instance of the agent's row above (its -svc row where embedding servers take the "
                  "query embeddings too), R_index = min(N x server box rate, client box rate) "
                  "with N embedding servers, K x the in-process rate on a Ray cluster of K boxes (`iba index "
                  f"--executor ray`).{driver}", "",
                  "| agent | setting | indexing (h) | run (h) | total (h) | run bound by |", "|---|---|---|---|---|---|"]
        for r in proj:
            lines.append(f"| `{r['agent']}` | {r['setting']} | {r['t_index_h']:.2f} | {r['t_run_h']:.2f} | "
                         f"**{r['t_total_h']:.2f}** | {r['bound']} |")
    lines += ["", END]
    return "\n".join(lines)


def write(results: dict[str, Any]) -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    from perf import replace_block

    replace_block(BENCHMARKS, BEGIN, END, render(results), "## Time to a full result (issue 33)")


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    if a.harness_child:
        return harness_child(a.harness_child)
    a.work.mkdir(parents=True, exist_ok=True)
    results = load_results(a.results)
    results["_path"] = str(a.results)
    if a.fresh:
        results["steps"] = {k: v for k, v in results.get("steps", {}).items() if k.split("/", 1)[0] not in a.only}
    settings = {"users": a.users, "seed": a.seed, "trials": a.trials, "latency": a.latency, "dataset": str(a.dataset)}
    if results.get("settings") not in (None, settings) and not a.fresh:
        log(f"the stored figures were measured with {results['settings']}; these options differ: rerun with --fresh")
        return 2
    results["settings"] = settings
    results.update(seed=a.seed, repeats=a.repeats, cores=len(os.sched_getaffinity(0)))
    if "sample" not in results or a.fresh:
        log("reading the sample")
        results["sample"] = sample(a)
        save(results)
    a.info = results["sample"]
    ensure_dataset(a)  # a resume on another machine has the stored sample but not the build
    stub = embed_server = None
    if "harness" in a.only:
        if not (a.work / "cache-inproc" / "index").is_dir():
            log("the harness reads the in-process index of the sample: indexing it first")
            index_step(a, a.info, 0)  # only its cache is needed here
        sys.path.insert(0, str(ROOT / "bench"))
        from stub_server import StubServer

        stub = StubServer(a.latency).__enter__()
        a.url = stub.url
        if not (a.work / "cache-servers-1" / "index").is_dir():
            log("the -svc harness rows read the sample's index built through a server: indexing it first")
            index_step(a, a.info, 1)
        embed_server = Servers(1, len(os.sched_getaffinity(0)), a.work / "logs")
        a.embed_url = embed_server.urls[0]
    try:
        run_plan(a, results)
    finally:
        if stub is not None:
            stub.__exit__(None, None, None)
        if embed_server is not None:
            embed_server.close()
    save(results)
    if not a.no_write and results.get("steps"):
        write(results)
    print(render(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
