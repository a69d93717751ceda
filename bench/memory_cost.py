"""What remembering and answering cost a memory system under IBA's memory protocol (issue 31).

Runs examples/notes_memory.py (one LLM call per ingested session, one per act) as a
`memory?cmd=` agent through `iba run`, against `python -m llama_cpp.server` serving the packaged
Qwen2.5-Coder-0.5B (the embedded model, on this machine's CPU), and reports from the store:

  per user    sessions, turns, ingest LLM calls / prompt / completion tokens / wall s (IngestRecord),
              acts with their calls / tokens / wall s (RunRecords), the server's CPU seconds
  one full user  the same for one user of a `--preset full` build (~350 sessions, ~5,000 turns)
  projection  a full run (every user of the full build, every task) from the measured rates

  python bench/memory_cost.py                                  # demo users, then u0000 of a full build
  python bench/memory_cost.py --full /tmp/full --full-user u0100 --threads 2
  python bench/memory_cost.py --skip-full                      # the demo users only (minutes)
  python bench/memory_cost.py --users u0002 --full-sessions 5 --full-acts 1   # a loaded machine: a prefix

--full-sessions N ingests only the first N sessions of the full user (a copy of the build holding
that user's history cut after N sessions; its tasks still come after it), and --full-acts K runs
only K of its tasks: the projection then uses the per-session and per-act rates of that prefix.

The full build is made once into --full (default runs/bench-memory/full, ~5 min) and reused.
Each invocation starts from fresh stores (nothing is resumed or cached), so it can be rerun as is.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sqlite3
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
NOTES = ROOT / "examples" / "notes_memory.py"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(threads: int, n_ctx: int, log: Path) -> tuple[subprocess.Popen, str]:
    sys.path.insert(0, str(ROOT / "src"))
    from iba.llm.models import model_path

    port = free_port()
    cmd = [PY, "-m", "llama_cpp.server", "--model", str(model_path("qwen2.5-coder-0.5b")), "--model_alias", "qwen",
           "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx), "--n_threads", str(threads)]
    env = {k: v for k, v in os.environ.items() if k.upper() != "API_KEY"}
    proc = subprocess.Popen(cmd, stdout=log.open("wb"), stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 180
    while True:
        if proc.poll() is not None:
            raise SystemExit(f"llama_cpp.server exited: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"{url}/models", timeout=2):
                return proc, url
        except OSError:
            if time.monotonic() > deadline:
                raise SystemExit("llama_cpp.server did not answer in 180 s") from None
            time.sleep(0.5)


def cpu_s(pid: int) -> float:
    """user + system CPU seconds of process `pid` so far (its threads included)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def prefix_dataset(full: Path, user: str, sessions: int, out: Path) -> Path:
    """A copy of `full` with only `user`, its history cut after `sessions` sessions (no answer key:
    nothing is scored)."""
    import shutil

    if out.exists():
        shutil.rmtree(out)
    (out / "histories").mkdir(parents=True)
    shutil.copy(full / "manifest.json", out / "manifest.json")
    for name in ("personas.jsonl", "instances.jsonl"):
        key = "id" if name == "personas.jsonl" else "user_id"
        lines = [line for line in (full / name).read_text(encoding="utf-8").splitlines() if json.loads(line)[key] == user]
        (out / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    kept, seen = [], []
    for line in (full / "histories" / f"{user}.jsonl").read_text(encoding="utf-8").splitlines():
        sid = json.loads(line)["session_id"]
        if not seen or seen[-1] != sid:
            seen.append(sid)
        if len(seen) > sessions:
            break
        kept.append(line)
    (out / "histories" / f"{user}.jsonl").write_text("\n".join(kept) + "\n", encoding="utf-8")
    return out


def run(dataset: Path, users: list[str], store: Path, url: str, server: subprocess.Popen, *,
        limit: int | None = None) -> dict:
    """`iba run` the notes memory on `users`; the store's figures and the CPU seconds spent."""
    store.unlink(missing_ok=True)
    spec = f"memory?cmd=python {NOTES} --base-url {url} --model qwen&network=true&ingest_timeout=3600&timeout=3600"
    cmd = [PY, "-m", "iba.cli", "run", str(dataset), "--agent", spec, "--store", str(store), "--no-score",
           "--quiet", "--timeout", "7200", "--model", "openai:qwen", "--base-url", url]  # the row's label: the memory's model
    for u in users:
        cmd += ["--user", u]
    if limit is not None:
        cmd += ["--limit", str(limit)]
    load0, server0, t0 = os.getloadavg()[0], cpu_s(server.pid), time.perf_counter()
    before = os.times()
    res = subprocess.run(cmd, capture_output=True, text=True)
    after = os.times()
    if res.returncode != 0:
        raise SystemExit(f"iba run failed ({res.returncode}):\n{res.stdout}\n{res.stderr[-3000:]}")
    db = sqlite3.connect(store)
    ingests = [json.loads(r) for (r,) in db.execute("SELECT record FROM ingests")]
    acts = [json.loads(r) for (r,) in db.execute("SELECT record FROM runs")]
    db.close()
    return {"wall_s": time.perf_counter() - t0, "server_cpu_s": cpu_s(server.pid) - server0,
            "iba_cpu_s": (after.children_user - before.children_user) + (after.children_system - before.children_system),
            "load": (load0, os.getloadavg()[0]), "ingests": ingests, "acts": acts}


def per_user(result: dict) -> list[dict]:
    rows = []
    for ing in sorted(result["ingests"], key=lambda r: r["user_id"]):
        acts = [a for a in result["acts"] if a["user_id"] == ing["user_id"]]
        rows.append({
            "user": ing["user_id"], "status": ing["status"], "sessions": ing["sessions"], "turns": ing["turns"],
            "ingest_calls": ing["usage"]["llm_calls"], "ingest_prompt": ing["usage"]["prompt_tokens"],
            "ingest_completion": ing["usage"]["completion_tokens"], "ingest_s": ing["wall_s"],
            "acts": len(acts), "act_calls": sum(a["usage"]["llm_calls"] for a in acts),
            "act_prompt": sum(a["usage"]["prompt_tokens"] for a in acts),
            "act_completion": sum(a["usage"]["completion_tokens"] for a in acts),
            "act_s": sum(a["latency_s"] for a in acts),
            "act_failed": sum(a["status"] != "ok" for a in acts)})
    return rows


def table(rows: list[dict]) -> str:
    head = ("| user | sessions | turns | ingest calls | ingest prompt tok | ingest completion tok | ingest wall s | "
            "acts | act prompt tok | act completion tok | act wall s |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    lines = [head]
    for r in rows:
        lines.append(f"| {r['user']} | {r['sessions']} | {r['turns']} | {r['ingest_calls']} | {r['ingest_prompt']:,} | "
                     f"{r['ingest_completion']:,} | {r['ingest_s']:.0f} | {r['acts']} | {r['act_prompt']:,} | "
                     f"{r['act_completion']:,} | {r['act_s']:.0f} |")
    return "\n".join(lines)


def history_totals_user(dataset: Path, user: str) -> int:
    """Sessions in one user's history."""
    sessions, last = 0, None
    with (dataset / "histories" / f"{user}.jsonl").open(encoding="utf-8") as f:
        for line in f:
            sid = json.loads(line)["session_id"]
            sessions += sid != last
            last = sid
    return sessions


def history_totals(dataset: Path) -> dict:
    """Users, sessions, turns and characters of a build's histories; tasks of its instances."""
    users = sessions = turns = chars = 0
    for path in sorted((dataset / "histories").glob("*.jsonl")):
        users += 1
        last = None
        with path.open(encoding="utf-8") as f:
            for line in f:
                t = json.loads(line)
                turns += 1
                chars += len(t["text"])
                if t["session_id"] != last:
                    sessions += 1
                    last = t["session_id"]
    tasks = sum(1 for _ in (dataset / "instances.jsonl").open(encoding="utf-8"))
    return {"users": users, "sessions": sessions, "turns": turns, "chars": chars, "tasks": tasks}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=ROOT / "runs" / "bench-memory")
    p.add_argument("--demo", type=Path, default=None, help="a demo build (default: built into --out)")
    p.add_argument("--users", default="u0000,u0001,u0002,u0003", help="demo users (default: all four)")
    p.add_argument("--full", type=Path, default=None, help="a --preset full build (default: built into --out)")
    p.add_argument("--full-user", default="u0000")
    p.add_argument("--skip-full", action="store_true")
    p.add_argument("--full-sessions", type=int, default=None, help="ingest only the first N sessions of the full user")
    p.add_argument("--full-acts", type=int, default=None, help="run only K of the full user's tasks")
    p.add_argument("--threads", type=int, default=1, help="llama.cpp threads of the server (default 1)")
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    demo = args.demo or args.out / "demo"
    if not (demo / "instances.jsonl").exists():
        subprocess.run([PY, "-m", "iba.cli", "build", "--preset", "demo", "--out", str(demo)], check=True,
                       capture_output=True)
    server, url = start_server(args.threads, 16384, args.out / "server.log")
    report: dict = {"machine": f"{os.cpu_count()} CPUs", "threads": args.threads}
    try:
        res = run(demo, args.users.split(","), args.out / "demo.sqlite", url, server)
        report["demo"] = {k: v for k, v in res.items() if k not in ("ingests", "acts")} | {"users": per_user(res)}
        print(f"demo users: wall {res['wall_s']:.0f} s, server CPU {res['server_cpu_s']:.0f} s, "
              f"load {res['load'][0]:.1f} -> {res['load'][1]:.1f}")
        print(table(report["demo"]["users"]))
        if not args.skip_full:
            full = args.full or args.out / "full"
            if not (full / "instances.jsonl").exists():
                subprocess.run([PY, "-m", "iba.cli", "build", "--preset", "full", "--out", str(full), "--no-progress"],
                               check=True, capture_output=True)
            full_sessions = history_totals_user(full, args.full_user)
            target = full if args.full_sessions is None else prefix_dataset(
                full, args.full_user, args.full_sessions, args.out / "full-prefix")
            res = run(target, [args.full_user], args.out / "full.sqlite", url, server,
                      limit=args.full_acts)
            report["full_user"] = {k: v for k, v in res.items() if k not in ("ingests", "acts")} | {"users": per_user(res)}
            report["full_totals"] = history_totals(full)
            report["full_user_sessions"] = full_sessions
            print(f"full user {args.full_user}: wall {res['wall_s']:.0f} s, server CPU {res['server_cpu_s']:.0f} s, "
                  f"load {res['load'][0]:.1f} -> {res['load'][1]:.1f}")
            print(table(report["full_user"]["users"]))
            u = report["full_user"]["users"][0]
            tot = report["full_totals"]
            per_session = {k: u[k] / u["sessions"] for k in ("ingest_calls", "ingest_prompt", "ingest_completion", "ingest_s")}
            per_act = {k: u[k] / max(1, u["acts"]) for k in ("act_calls", "act_prompt", "act_completion", "act_s")}
            user_proj_h = per_session["ingest_s"] * full_sessions / 3600
            print(f"full user {args.full_user}: {full_sessions} sessions; at the measured rate its whole ingest takes "
                  f"{user_proj_h:.2f} h wall, {u['ingest_prompt'] / u['sessions'] * full_sessions:,.0f} prompt tokens")
            report["full_user_ingest_h"] = user_proj_h
            proj = {"ingest_calls": per_session["ingest_calls"] * tot["sessions"],
                    "ingest_prompt": per_session["ingest_prompt"] * tot["sessions"],
                    "ingest_completion": per_session["ingest_completion"] * tot["sessions"],
                    "ingest_h": per_session["ingest_s"] * tot["sessions"] / 3600,
                    "act_calls": per_act["act_calls"] * tot["tasks"], "act_prompt": per_act["act_prompt"] * tot["tasks"],
                    "act_completion": per_act["act_completion"] * tot["tasks"],
                    "act_h": per_act["act_s"] * tot["tasks"] / 3600}
            report["projection"] = proj
            print(f"full build: {tot}")
            print("projected full run (per-session and per-act rates of the full user x the build's sessions and tasks): "
                  + ", ".join(f"{k} {v:,.0f}" for k, v in proj.items()))
        med = statistics.median(r["ingest_s"] / r["sessions"] for r in report["demo"]["users"])
        print(f"demo: median ingest wall per session {med:.1f} s")
    finally:
        server.terminate()
        server.wait(timeout=30)
    (args.out / "memory_cost.json").write_text(json.dumps(report, indent=2))
    print(f"figures: {args.out / 'memory_cost.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
