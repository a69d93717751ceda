"""The stats step's history parse (issue 34): `construct.stats._turn_fields` against json.loads of every line.

  python bench/stats_turns.py /tmp/iba-full            # a `iba build --preset full` folder; 3 rounds

_turn_fields reads a line in the builder's exact format by a match of its head and json's own
string scanner for the text, anything else by json.loads; the reference parses every line as JSON.
Both must give the same fields (checked); the figures are CPU seconds per round over every history
(median of the rounds). Timing is measured here, never asserted in tests; say "under load" when the
machine was busy.
"""

from __future__ import annotations

import argparse
import re
import statistics
import time
from pathlib import Path

from iba.construct import stats
from iba.construct.stats import _turn_fields


def json_fields(path: Path) -> tuple[list[str], list[int], list[str], list[str], list[int]]:
    """_turn_fields with its fast path off: every line through its json.loads branch."""
    head, stats._TURN_HEAD = stats._TURN_HEAD, re.compile(r"(?!)")  # a pattern that never matches
    try:
        return _turn_fields(path)
    finally:
        stats._TURN_HEAD = head


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset", type=Path)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    files = sorted((args.dataset / "histories").glob("*.jsonl"))
    cpu: dict[str, list[float]] = {"_turn_fields": [], "json.loads": []}
    for _ in range(args.rounds):
        for name, fn in (("_turn_fields", _turn_fields), ("json.loads", json_fields)):
            c0 = time.process_time()
            out = [fn(p) for p in files]
            cpu[name].append(time.process_time() - c0)
    assert [_turn_fields(p) for p in files[:20]] == [json_fields(p) for p in files[:20]]
    turns = sum(len(o[0]) for o in out)
    print(f"{len(files)} histories, {turns} turns, {args.rounds} rounds (CPU seconds per round, median [min-max]):")
    for name, xs in cpu.items():
        print(f"  {name:13s} {statistics.median(xs):6.2f} [{min(xs):.2f}-{max(xs):.2f}]")


if __name__ == "__main__":
    main()
