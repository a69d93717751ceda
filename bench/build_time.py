"""How long `iba build --preset full` takes, where the time goes, and whether its bytes changed (issue 33).

  python bench/build_time.py --reference /tmp/ref-full               # 3 timed builds, bytes checked
  python bench/build_time.py --repeats 1 --phases                    # + one in-process build by phase
  python bench/build_time.py --preset demo --reference /tmp/ref-demo

A timed build runs `iba build --preset P --seed S --out DIR --no-progress` under /usr/bin/time -v: wall
seconds, CPU seconds (user + sys, worker processes included) and the largest single process's max
RSS; a sampler beside it (every 0.1 s) adds the peak of the build's whole process tree: summed RSS
(a page shared by forked processes counted in each: an upper bound) and summed PSS (a shared page
split between them: the memory the build holds; the figure to hold against a memory limit). With
--reference, every file of each build is compared byte for byte (sha256) with the reference
folder, a build made by earlier code with the same preset and seed: the build must not change.
--phases runs one more build in this process, in one process (--workers 1), with the builder's
parts wrapped, and prints the wall and CPU seconds of each part (exclusive: a part's time excludes
the parts it calls).
Timing is measured here, never asserted in tests; say "under load" when the machine was busy.
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
IBA = [sys.executable, "-m", "iba.cli"]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", default="full", choices=("demo", "small", "full"), help="preset to build (default: full)")
    p.add_argument("--seed", type=int, default=42, help="build seed (default: 42)")
    p.add_argument("--repeats", type=int, default=3, help="timed builds; the median is reported (default: 3)")
    p.add_argument("--reference", type=Path, help="a folder built by earlier code with the same preset and seed: "
                   "every file must be byte-identical")
    p.add_argument("--phases", action="store_true", help="also one in-process build, timed by part")
    p.add_argument("--work", type=Path, default=None, help="scratch folder (default: a temporary one, removed)")
    p.add_argument("--json", type=Path, default=None, help="also write the figures here as JSON")
    return p.parse_args(argv)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- bytes


def digests(root: Path) -> dict[str, str]:
    """Relative path -> sha256 of every file under `root` (temporary files of an atomic write excluded)."""
    out = {}
    for f in sorted(root.rglob("*")):
        if f.is_file() and not f.name.endswith(".tmp"):
            out[str(f.relative_to(root))] = hashlib.sha256(f.read_bytes()).hexdigest()
    return out


def compare(built: Path, reference: Path) -> list[str]:
    """What differs between two build folders (empty: byte-identical)."""
    a, b = digests(built), digests(reference)
    problems = [f"only in the reference: {k}" for k in sorted(b.keys() - a.keys())]
    problems += [f"only in the build: {k}" for k in sorted(a.keys() - b.keys())]
    problems += [f"differs: {k}" for k in sorted(a.keys() & b.keys()) if a[k] != b[k]]
    return problems


# --------------------------------------------------------------------------- timed builds


def _tree_memory_kb(pid: int) -> tuple[int, int]:
    """(summed VmRSS, summed Pss) of `pid` and all its descendants (0 once gone). Pss splits a
    page shared by forked processes between them: the sum is the memory the tree really holds."""
    children: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            text = Path(f"/proc/{d}/stat").read_text()
        except OSError:
            continue
        ppid = int(text.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(d))
    rss = pss = 0
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            roll = Path(f"/proc/{p}/smaps_rollup").read_text()
            rss += int(re.search(r"^Rss:\s+(\d+)", roll, re.M).group(1))  # type: ignore[union-attr]
            pss += int(re.search(r"^Pss:\s+(\d+)", roll, re.M).group(1))  # type: ignore[union-attr]
        except (OSError, AttributeError):
            pass
        todo += children.get(p, [])
    return rss, pss


def _time_v(stderr: str, label: str) -> float:
    m = re.search(rf"^\s*{re.escape(label)}.*: (\S+)\s*$", stderr, re.M)
    if not m:
        raise RuntimeError(f"/usr/bin/time -v gave no {label!r}:\n{stderr[-2000:]}")
    value = m.group(1)
    if ":" in value:  # h:mm:ss or m:ss.ss
        return sum(float(x) * 60 ** i for i, x in enumerate(reversed(value.split(":"))))
    return float(value)


def timed_build(a: argparse.Namespace, out: Path) -> dict[str, Any]:
    shutil.rmtree(out, ignore_errors=True)
    cmd = ["/usr/bin/time", "-v", *IBA, "build", "--preset", a.preset, "--seed", str(a.seed), "--out", str(out), "--no-progress"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    peak = [0, 0]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.1):
            rss, pss = _tree_memory_kb(proc.pid)
            peak[0], peak[1] = max(peak[0], rss), max(peak[1], pss)

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    _, err = proc.communicate()
    done.set()
    t.join()
    if proc.returncode:
        raise RuntimeError(f"build failed ({proc.returncode}):\n{err[-3000:]}")
    return {
        "wall_s": _time_v(err, "Elapsed (wall clock) time"),
        "cpu_s": _time_v(err, "User time (seconds)") + _time_v(err, "System time (seconds)"),
        "sys_s": _time_v(err, "System time (seconds)"),
        "max_rss_mb": _time_v(err, "Maximum resident set size") / 1024,
        "tree_rss_mb": peak[0] / 1024,  # /usr/bin/time itself is ~2 MB of it
        "tree_pss_mb": peak[1] / 1024,
        "load": os.getloadavg()[0],
    }


# --------------------------------------------------------------------------- phases


class Phases:
    """Exclusive wall and CPU seconds per label, for functions wrapped with `wrap`."""

    def __init__(self) -> None:
        self.wall: dict[str, float] = {}
        self.cpu: dict[str, float] = {}
        self.stack: list[tuple[str, float, float]] = []

    @staticmethod
    def _now() -> tuple[float, float]:
        return time.perf_counter(), time.process_time()

    def _add(self, label: str, wall: float, cpu: float) -> None:
        self.wall[label] = self.wall.get(label, 0.0) + wall
        self.cpu[label] = self.cpu.get(label, 0.0) + cpu

    @contextmanager
    def part(self, label: str):
        w0, c0 = self._now()
        if self.stack:  # pause the enclosing part
            outer, ow, oc = self.stack[-1]
            self._add(outer, w0 - ow, c0 - oc)
        self.stack.append((label, w0, c0))
        try:
            yield
        finally:
            w1, c1 = self._now()
            _, sw, sc = self.stack.pop()
            self._add(label, w1 - sw, c1 - sc)
            if self.stack:
                outer, _, _ = self.stack[-1]
                self.stack[-1] = (outer, w1, c1)

    def wrap(self, owner: Any, attr: str, label: str) -> None:
        fn = getattr(owner, attr, None)
        if fn is None:
            log(f"  (no {getattr(owner, '__name__', owner)}.{attr} to time: skipped)")
            return
        phases = self

        if _is_generator(fn):
            def wrapped(*args, **kwargs):
                gen = fn(*args, **kwargs)
                while True:
                    with phases.part(label):
                        try:
                            item = next(gen)
                        except StopIteration:
                            return
                    yield item
        else:
            def wrapped(*args, **kwargs):
                with phases.part(label):
                    return fn(*args, **kwargs)
        setattr(owner, attr, wrapped)


def _is_generator(fn: Any) -> bool:
    return inspect.isgeneratorfunction(fn)


# (module, attribute, label): the builder's parts. Parts missing in this version of the code are
# skipped (the first rows are the code before issue 33, the others after).
PARTS = [
    ("iba.construct.builder", "plan_dataset", "plan: personas, states, instances, sessions"),
    ("iba.construct.builder", "plan_work", "plan: personas, states, Table 2 counts"),
    ("iba.construct.builder", "table2_counts", "plan: personas, states, Table 2 counts"),
    ("iba.construct.builder", "plan_persona", "plan: personas, states, instances, sessions"),
    ("iba.construct.distractors", "add_distractors", "plan: distractors"),
    ("iba.construct.distractors", "anchor_rates", "plan: distractors"),
    ("iba.construct.distractors", "profile_counts", "plan: distractors"),
    ("iba.construct.distractors", "anchor_counts", "plan: distractors"),
    ("iba.construct.procedural_writer.ProceduralWriter", "texts", "write: history text"),
    ("iba.construct.builder", "write_jsonl", "write: records as JSON, files"),
    ("iba.construct.builder", "write_dataset", "write: records as JSON, files"),
    ("iba.construct.builder", "answer_key", "write: answer keys, distractor labels"),
    ("iba.construct.builder", "distractor_label", "write: answer keys, distractor labels"),
    ("iba.construct.builder", "write_stats", "stats: Table 2, counts"),
    ("iba.construct.stats", "tell_aucs", "stats: feature tells"),
    ("iba.construct.tell_audit", "audit", "stats: tell audit"),
    ("iba.construct.tell_audit", "recurrence_figures", "stats: tell audit"),
    ("iba.construct.tell_audit", "_features", "stats: tell audit"),
    ("iba.construct.tell_audit", "_fit", "stats: tell audit"),
    ("iba.construct.tell_audit", "_score", "stats: tell audit"),
]


def phase_build(a: argparse.Namespace, out: Path) -> dict[str, Any]:
    import importlib

    phases = Phases()
    for mod, attr, label in PARTS:
        owner_path = mod.split(".")
        try:
            owner: Any = importlib.import_module(mod)
        except ImportError:  # a class path: module.Class
            owner = getattr(importlib.import_module(".".join(owner_path[:-1])), owner_path[-1])
        phases.wrap(owner, attr, label)
    from iba.construct.builder import build_dataset

    # one process, so that every part is seen (worker processes would hide theirs)
    one = {"workers": 1} if "workers" in inspect.signature(build_dataset).parameters else {}
    shutil.rmtree(out, ignore_errors=True)
    w0, c0 = phases._now()
    with phases.part("other (taxonomy, manifest, glue)"):
        build_dataset(out, preset=a.preset, seed=a.seed, progress=False, **one)
    w1, c1 = phases._now()
    return {"wall": phases.wall, "cpu": phases.cpu, "total_wall": w1 - w0, "total_cpu": c1 - c0}


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    work = a.work or Path(tempfile.mkdtemp(prefix="build-time-"))
    work.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {"preset": a.preset, "seed": a.seed, "cores": len(os.sched_getaffinity(0)), "runs": []}
    failed = False
    try:
        for i in range(a.repeats):
            out = work / "build"
            r = timed_build(a, out)
            if a.reference:
                problems = compare(out, a.reference)
                r["identical"] = not problems
                failed |= bool(problems)
                if problems:
                    log("  bytes differ from the reference:\n    " + "\n    ".join(problems[:20]))
            result["runs"].append(r)
            log(f"build {i + 1}/{a.repeats}: {r['wall_s']:.1f} s wall, {r['cpu_s']:.1f} s CPU ({r['sys_s']:.1f} sys), max RSS {r['max_rss_mb']:.0f} MB, "
                f"process tree RSS {r['tree_rss_mb']:.0f} MB / PSS {r['tree_pss_mb']:.0f} MB, load {r['load']:.1f}"
                + ("" if not a.reference else ", identical to the reference" if r["identical"] else ", DIFFERS"))
        if result["runs"]:
            runs = result["runs"]
            result["median"] = {k: statistics.median(r[k] for r in runs) for k in ("wall_s", "cpu_s", "max_rss_mb", "tree_rss_mb", "tree_pss_mb")}
            m = result["median"]
            walls = ", ".join(f"{r['wall_s']:.1f}" for r in runs)
            print(f"{a.preset} build, median of {len(runs)}: {m['wall_s']:.1f} s wall ({walls}), "
                  f"{m['cpu_s']:.1f} s CPU, peak RSS {m['max_rss_mb']:.0f} MB "
                  f"(process tree: RSS {m['tree_rss_mb']:.0f} MB, PSS {m['tree_pss_mb']:.0f} MB)"
                  + (f"; bytes {'identical to' if not failed else 'DIFFERENT from'} {a.reference}" if a.reference else ""))
        if a.phases:
            out = work / "phases"
            ph = phase_build(a, out)
            result["phases"] = ph
            if a.reference:
                problems = compare(out, a.reference)
                failed |= bool(problems)
                if problems:
                    log("  phase build differs from the reference:\n    " + "\n    ".join(problems[:20]))
            print(f"\nparts of one in-process build ({ph['total_wall']:.1f} s wall, {ph['total_cpu']:.1f} s CPU, exclusive):")
            print("| part | wall s | CPU s |\n|---|---|---|")
            for label in sorted(ph["wall"], key=lambda k: -ph["cpu"][k]):
                print(f"| {label} | {ph['wall'][label]:.1f} | {ph['cpu'][label]:.1f} |")
        if a.json:
            a.json.write_text(json.dumps(result, indent=2) + "\n")
    finally:
        if a.work is None:
            shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
