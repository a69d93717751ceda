"""How coherent a build's histories read, generator v2 against v3 (issue 32).

  python bench/coherence.py                          # builds full v2 and v3 (seed 42) in a scratch folder, measures both
  python bench/coherence.py --v2 /tmp/v2 --v3 /tmp/v3   # measures two builds made already
  python bench/coherence.py --preset demo --json out.json

The figures are iba.construct.coherence.measure's: the share of user questions (from the topic bank)
whose next assistant turn states the fact the data pairs with that question, and the share that
states the answer to another question of the topic instead; seams per 1,000 turns outside the
labelled cue clauses, by kind; asides per user turn. Each build's tell audit figures (stats.json)
are printed beside them, so a gain in coherence that cost the benchmark its hardness shows.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path

IBA = [sys.executable, "-m", "iba.cli"]


def build(out: Path, preset: str, seed: int, generator: int) -> None:
    subprocess.run([*IBA, "build", "--preset", preset, "--seed", str(seed), "--out", str(out), "--generator", str(generator),
                    "--no-progress"], check=True, stdout=subprocess.DEVNULL)


def audit(root: Path) -> dict:
    s = json.loads((root / "stats.json").read_text())
    c = s["tell_audit"]["classifier"]
    return {
        "precision_at_n": c["precision_at_n"], "auc_evidence_vs_distractors": c["auc_evidence_vs_distractors"],
        "recurrence_median_share": s["tell_audit"]["recurrence"]["median_share"], "max_repeats": s["tell_audit"]["recurrence"]["max_repeats"],
        "dynamic_share": s["dynamic_checkpoint_share"], "turn_length_auc": s["tells"]["auc"]["turn_length"],
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--v2", type=Path, help="a generator-2 build to measure (default: build one)")
    p.add_argument("--v3", type=Path, help="a generator-3 build to measure (default: build one)")
    p.add_argument("--preset", default="full", choices=("demo", "small", "full"))
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--personas", type=int, default=0, help="measure this many users (drawn with seed 0, the same in "
                   "both builds; default 0: all)")
    p.add_argument("--json", type=Path, help="also write the figures here")
    args = p.parse_args(argv)
    from iba.construct.coherence import measure

    with tempfile.TemporaryDirectory() as tmp:
        roots = {}
        for version, given in ((2, args.v2), (3, args.v3)):
            if given is None:
                given = Path(tmp) / f"v{version}"
                print(f"building {args.preset} (seed {args.seed}) with generator {version} ...", file=sys.stderr, flush=True)
                build(given, args.preset, args.seed, version)
            roots[version] = given
        figures = {}
        for version, root in roots.items():
            manifest = json.loads((root / "manifest.json").read_text())
            got = manifest["params"].get("generator_version")
            if got != version:
                print(f"{root}: generator_version is {got}, not {version}", file=sys.stderr)
                return 2
            print(f"measuring {root} ...", file=sys.stderr, flush=True)
            users = sorted(f.stem for f in (root / "histories").glob("*.jsonl"))
            if args.personas:
                random.Random(0).shuffle(users)
                users = sorted(users[: args.personas])
            figures[f"v{version}"] = {"coherence": measure(root, users), "audit": audit(root)}
    print(json.dumps(figures, indent=2))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
