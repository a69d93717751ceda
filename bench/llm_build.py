"""The LLM writer on a real model: the demo LLM build through batch rounds, its audits, and the cost
of each --llm-scope for the full preset estimated from what that build's calls measured.

  python bench/llm_build.py                        # 0.5B, scope exchanges: build, audits, cost (hours on 2 busy cores)
  python bench/llm_build.py --chat-sample 0        # no filler-chat sample (then no estimate for scope all)
  python bench/llm_build.py --skip-build           # only the audits and the estimate from OUT's build
  python bench/llm_build.py --sample-sessions 8 --chat-sample 3   # no build: the estimate from 8 sessions

1. The demo preset (seed 42) written by --model through the batch path, as a user would with a
   provider: `iba build --writer llm --batch OUT/batch` (exit 3: a round of requests), `iba batch
   answer OUT/batch --model M` (the embedded model answers them), again until the build exits 0.
   Resumable: the journal and the batch folder keep what was done; a fresh OUT starts over.
   Wall and CPU time (children's user+sys) of the whole loop are recorded.
2. `iba stats` on it and on the procedural demo build of the same seed: the tell and style audits
   of both, and whether the answer keys agree (spans aside).
3. The cost: every piece the writer journaled (an evidence, state or distractor exchange, and in
   scope all a session's filler chat) carries its calls and prompt and completion tokens, per
   prompt. Per kind of piece, the mean over the build's pieces (95% bootstrap interval, resampling
   pieces) times that kind's count in the full preset's plan (seed 42) gives the full build's calls
   and tokens for scope exchanges; a writing attempt and its check are counted as many times as a
   build with 0 or 2 rewrites would make them, at the failure rate of the sample's checks. Scope all adds one filler chat per session: --chat-sample sessions of the demo
   plan (seeded, all lengths) are written here by the same model; its calls and prompt tokens per
   piece and completion tokens per turn, times the full plan's sessions and turns, give the rest.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import resource
import shlex
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KEYS = ("llm_calls", "prompt_tokens", "completion_tokens")
EXCHANGE_ROLES = ("evidence", "state_active", "state_inactive", "own_other_topic", "other_person", "ended", "hypothetical")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=Path("runs/bench-llm-build"), help="default: runs/bench-llm-build")
    p.add_argument("--model", default="local:qwen2.5-coder-0.5b", help="writer model (default: the packaged 0.5B)")
    p.add_argument("--scope", choices=("all", "exchanges"), default="exchanges", help="the demo build's --llm-scope (default exchanges)")
    p.add_argument("--max-rewrites", type=int, default=0,
                   help="the build's --max-rewrites (default 0: each piece's first attempt is measured, and the "
                   "estimate puts rewrites back at the sample's own failure rate)")
    p.add_argument("--personas", type=int, default=None, help="the build's --personas (default: the demo's 4)")
    p.add_argument("--chat-sample", type=int, default=8, help="filler-chat sessions written for scope all's estimate (default 8)")
    p.add_argument("--skip-build", action="store_true", help="use OUT's finished build")
    p.add_argument("--sample-sessions", type=int, default=0, metavar="N",
                   help="instead of the demo build (and its audits): write N demo sessions in this process, chosen "
                   "(seeded) so that every kind of exchange is in the sample, and estimate the cost from their pieces "
                   "(for a machine where the whole demo build takes too long)")
    p.add_argument("--json", type=Path, default=ROOT / "bench/results/llm_build.json", help="where the figures go")
    return p.parse_args(argv)


def iba(*args: str) -> int:
    print("$ " + shlex.join(["iba", *args]), flush=True)
    return subprocess.run([sys.executable, "-m", "iba.cli", *args], check=False).returncode


def cpu_children() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def demo_options(a: argparse.Namespace) -> list[str]:
    return ["--preset", "demo", "--seed", "42", *(["--personas", str(a.personas)] if a.personas else [])]


def build(a: argparse.Namespace) -> dict:
    """The batch loop; returns rounds, wall and CPU seconds of this invocation."""
    ds, batch = a.out / "ds", a.out / "batch"
    t0, c0, rounds = time.perf_counter(), cpu_children(), 0
    while True:
        rc = iba("build", *demo_options(a), "--out", str(ds), "--writer", "llm", "--model", a.model,
                 "--llm-scope", a.scope, "--max-rewrites", str(a.max_rewrites), "--batch", str(batch), "--no-progress")
        if rc == 0:
            break
        if rc != 3:
            sys.exit(f"iba build exited {rc}")
        rounds += 1
        rc = iba("batch", "answer", str(batch), "--model", a.model, "--no-cache", "--quiet")
        if rc not in (0, 1):  # 1: some calls failed; the next round asks them again
            sys.exit(f"iba batch answer exited {rc}")
    return {"rounds_this_run": rounds, "wall_s": round(time.perf_counter() - t0, 1), "cpu_s": round(cpu_children() - c0, 1)}


def audits(root: Path) -> dict:
    stats = json.loads((root / "stats.json").read_text(encoding="utf-8"))
    c = stats.get("tell_audit", {}).get("classifier", {})
    keep = ("available", "reason", "train_personas", "test_personas", "test_evidence_turns", "test_distractor_turns",
            "precision_at_n", "auc_evidence_vs_rest", "auc_evidence_vs_distractors")
    return {"tell_audit": {k: c[k] for k in keep if k in c}, "style_audit": stats.get("style_audit"),
            "feature_audit": stats.get("tells", {}).get("auc")}


def pieces_of(root: Path) -> list[dict]:
    """Every journaled piece with its role (a state mention split by whether it is checked)."""
    lines = (root / "writer_journal.jsonl").read_text(encoding="utf-8").splitlines()[1:]
    return entry_pieces([json.loads(line) for line in lines])


def entry_pieces(entries: list[dict]) -> list[dict]:
    out = []
    for e in entries:
        for p in e["pieces"]:
            role = p["role"]
            if role == "state":
                role = "state_active" if e["turn_id"] else "state_inactive"
            out.append({**p, "role": role, "turns": len(e["texts"])})
    return out


def session_roles(s) -> list[str]:
    """The kinds of exchange a planned session holds (as pieces_of names them)."""
    roles = [d.form for _, d in s.distractors]
    if s.kind == "evidence":
        roles.append("evidence")
    elif s.kind == "state":
        roles.append("state_active" if s.labelled is not None else "state_inactive")
    return roles


async def write_sample(a: argparse.Namespace) -> list[dict]:
    """Journal entries of `a.sample_sessions` demo sessions written by the model (scope exchanges,
    one call at a time): sessions taken in a seeded order, those with the fewest exchanges first,
    while they add a kind of exchange the sample has fewer than two of, then any."""
    from iba.construct.builder import plan_dataset
    from iba.construct.llm_writer import LLMWriter
    from iba.construct.presets import get_preset
    from iba.llm import resolve_backend
    from iba.taxonomy import load_taxonomy

    plans = plan_dataset(load_taxonomy(), get_preset("demo"), seed=42, noise_ratio=50, history_turns=None, personas=None)
    sessions = [(p, s) for p in plans for s in p.sessions if session_roles(s)]
    random.Random(0).shuffle(sessions)
    sessions.sort(key=lambda x: len(session_roles(x[1])))  # the fewest pieces first: a sample of every kind, cheaply
    have: Counter[str] = Counter()
    pick = []
    for p, s in sessions:
        if len(pick) < a.sample_sessions and any(have[r] < 2 for r in session_roles(s)):
            pick.append((p, s))
            have.update(session_roles(s))
    rest = [x for x in sessions if x not in pick]
    pick += rest[: a.sample_sessions - len(pick)]
    writer = LLMWriter(resolve_backend(a.model, use_cache=False, timeout=1800), a.out, seed=42, max_rewrites=a.max_rewrites,
                       concurrency=1, progress=False, scope="exchanges")
    # each session appended as it is written (with its wall and CPU seconds): a rerun goes on from there
    path = a.out / "sample.jsonl"
    done = {json.loads(x)["key"] for x in path.read_text(encoding="utf-8").splitlines()} if path.exists() else set()
    for plan, s in pick:
        if s.key in done:
            continue
        t0, c0 = time.perf_counter(), time.process_time()
        entry = await writer.write_session(plan, s)
        entry.update(wall_s=round(time.perf_counter() - t0, 1), cpu_s=round(time.process_time() - c0, 1))
        with path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")
        print(f"sample: {s.key} {session_roles(s)} {entry['usage']} {entry['wall_s']} s", flush=True)
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


def full_counts(seed: int = 42) -> dict:
    """Pieces of each kind in the full preset's plan, and its sessions and turns."""
    from iba.construct.builder import plan_dataset
    from iba.construct.presets import get_preset
    from iba.taxonomy import load_taxonomy

    pre = get_preset("full")
    plans = plan_dataset(load_taxonomy(), pre, seed=seed, noise_ratio=pre.noise_ratio, history_turns=None, personas=None)
    n: Counter[str] = Counter()
    for p in plans:
        for s in p.sessions:
            n["sessions"] += 1
            n["turns"] += s.n_turns
            if s.kind == "evidence":
                n["evidence"] += 1
            elif s.kind == "state":
                n["state_active" if s.labelled is not None else "state_inactive"] += 1
            for _, d in s.distractors:
                n[d.form] += 1
    return dict(n)


def bootstrap_total(values: list[float], count: int, rng: random.Random, reps: int = 2000) -> list[float]:
    """count x the mean of `values`, and its 95% bootstrap interval (resampling values)."""
    if not values:
        return [0.0, 0.0, 0.0]
    mean = sum(values) / len(values)
    means = sorted(sum(rng.choices(values, k=len(values))) / len(values) for _ in range(reps))
    return [mean * count, means[int(0.025 * reps)] * count, means[int(0.975 * reps) - 1] * count]


WRITERS = ("build_user_turns", "build_aside_turns", "build_casual_chat")
CHECKS = ("build_evidence_check", "build_distractor_check")


def attempt_cost(p: dict) -> tuple[dict, dict]:
    """(what one writing attempt and its check cost, what is paid once: the replies) of a piece
    written at max_rewrites 0."""
    by = p.get("usage_by_prompt", {})
    once = {k: sum(u[k] for n, u in by.items() if n not in WRITERS + CHECKS) for k in KEYS}
    per = {k: sum(u[k] for n, u in by.items() if n in WRITERS + CHECKS) for k in KEYS}
    return per, once


def expected_attempts(fail: float, rewrites: int) -> float:
    """Attempts per piece when each fails its check with probability `fail`, independently."""
    return sum(fail**i for i in range(rewrites + 1))


def estimate(pieces: list[dict], chat: list[dict], counts: dict, rewrites: int) -> dict:
    """The full preset's calls and tokens, per scope, at `rewrites` rewrites of a failing turn (the
    sample's own failure rate per kind), with 95% bootstrap intervals over the sampled pieces."""
    rng = random.Random(0)
    by_role: dict[str, list[dict]] = defaultdict(list)
    for p in pieces:
        by_role[p["role"]].append(p)
    per_role, exchanges = {}, {k: [0.0, 0.0, 0.0] for k in KEYS}
    for role in EXCHANGE_ROLES:
        ps, n = by_role.get(role, []), counts.get(role, 0)
        checked = [p for p in ps if p["passed"] is not None and not any("kept unconfirmed" in x for x in p["problems"])]
        fail = sum(p["passed"] is False for p in checked) / len(checked) if checked else 0.0
        m = expected_attempts(fail, rewrites)
        costs = [attempt_cost(p) for p in ps]
        per_role[role] = {"sampled": len(ps), "in_full": n, "check_failure_rate": round(fail, 3),
                          "expected_attempts": round(m, 3)}
        if n and not ps:
            per_role[role]["note"] = "no piece of this kind in the sample: left out of the estimate"
        for k in KEYS:
            values = [per[k] * m + once[k] for per, once in costs]
            per_role[role][k] = round(sum(values) / len(values), 1) if values else None
            t = bootstrap_total(values, n, rng)
            # the interval of a sum of independent parts: the parts' bounds added (conservative)
            exchanges[k] = [x + y for x, y in zip(exchanges[k], t)]
    out = {"rewrites": rewrites, "per_piece": per_role, "exchanges": {k: [round(x) for x in v] for k, v in exchanges.items()}}
    if chat:
        turns = sum(c["turns"] for c in chat)
        per_turn = [c["usage"]["completion_tokens"] / c["turns"] for c in chat]
        chat_total = {
            "llm_calls": bootstrap_total([c["usage"]["llm_calls"] for c in chat], counts["sessions"], rng),
            "prompt_tokens": bootstrap_total([c["usage"]["prompt_tokens"] for c in chat], counts["sessions"], rng),
            "completion_tokens": bootstrap_total(per_turn, counts["turns"], rng),
        }
        out["chat_sample"] = {"sessions": len(chat), "turns": turns, "fallbacks": sum(c["fallback"] for c in chat),
                              "completion_tokens_per_turn": round(sum(c["usage"]["completion_tokens"] for c in chat) / turns, 1)}
        out["all"] = {k: [round(x + y) for x, y in zip(exchanges[k], chat_total[k])] for k in KEYS}
    return out


async def write_chats(model: str, n: int) -> list[dict]:
    """`n` filler chats of demo sessions (seeded, spread over lengths), written by `model`."""
    from iba.construct.builder import plan_dataset
    from iba.construct.llm_writer import LLMWriter
    from iba.construct.personas import persona_summary
    from iba.construct.presets import get_preset
    from iba.llm import resolve_backend

    from iba.taxonomy import load_taxonomy

    plans = plan_dataset(load_taxonomy(), get_preset("demo"), seed=42, noise_ratio=50, history_turns=None, personas=None)
    sessions = sorted(((p, s) for p in plans for s in p.sessions), key=lambda x: (x[1].n_turns, x[1].key))
    pick = [sessions[round(i * (len(sessions) - 1) / max(1, n - 1))] for i in range(n)] if n else []
    writer = LLMWriter(resolve_backend(model, use_cache=False, timeout=1800), "/tmp", seed=42, progress=False)
    out = []
    for plan, s in pick:
        piece = await writer._chat(s, persona_summary(plan.persona))
        out.append({**piece.record(), "turns": s.n_turns})
        print(f"chat sample: {s.key} {s.n_turns} turns, {piece.usage.model_dump()}", flush=True)
    return out


def main() -> None:
    a = parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    result: dict = {"model": a.model, "scope": a.scope, "max_rewrites": a.max_rewrites, "personas": a.personas,
                    "command": " ".join(sys.argv)}
    if a.sample_sessions:
        entries = asyncio.run(write_sample(a))
        result["sample"] = {"sessions": len(entries), "wall_s": round(sum(e["wall_s"] for e in entries), 1),
                            "cpu_s": round(sum(e["cpu_s"] for e in entries), 1)}
        pieces = entry_pieces(entries)
    else:
        pieces = build_and_audit(a, result)
    chat_path = a.out / "chat_sample.json"
    if a.chat_sample and not chat_path.exists():
        t0, c0 = time.perf_counter(), time.process_time()
        chat = asyncio.run(write_chats(a.model, a.chat_sample))
        chat_path.write_text(json.dumps({"pieces": chat, "wall_s": round(time.perf_counter() - t0, 1),
                                         "cpu_s": round(time.process_time() - c0, 1)}, indent=2), encoding="utf-8")
    chat = json.loads(chat_path.read_text(encoding="utf-8"))["pieces"] if chat_path.exists() else []
    counts = full_counts()
    result["full_counts"] = counts
    result["cost_full_preset"] = [estimate(pieces, chat, counts, r) for r in sorted({0, 2, a.max_rewrites})]
    a.json.parent.mkdir(parents=True, exist_ok=True)
    a.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=2))


def build_and_audit(a: argparse.Namespace, result: dict) -> list[dict]:
    """The demo LLM build (unless --skip-build) and its audits beside the procedural build's; its pieces."""
    if not a.skip_build:
        result["build"] = build(a)
    ds, proc = a.out / "ds", a.out / "procedural"
    if not (proc / "manifest.json").exists():
        iba("build", *demo_options(a), "--out", str(proc), "--no-progress")
    from iba.dataset import Dataset

    def key(root: Path) -> dict:
        return {k: v.model_dump(exclude={"evidence": {"__all__": {"span", "clause"}}}) for k, v in Dataset(root).answer_keys().items()}

    result["same_key_as_procedural"] = key(ds) == key(proc)
    result["llm"], result["procedural"] = audits(ds), audits(proc)
    report = json.loads((ds / "writer_report.json").read_text(encoding="utf-8"))
    result["writer_report"] = {k: report[k] for k in ("labelled", "distractors", "chat", "usage", "usage_by_role", "fallbacks")}
    return pieces_of(ds)


if __name__ == "__main__":
    main()
