"""Write docs/histories.md: the same sessions of a generator-2 and a generator-3 build, verbatim.

  python tools/sample_histories.py --v2 /tmp/v2full --v3 /tmp/v3full [--user u0000] [--out docs/histories.md]

Both builds must have the same preset and seed: their plans are the same, so a session id names the
same session (same kind, length and labelled turns) in both, and only the text differs. Picks, for
the user, the shortest session (of at least 8 turns) of each kind: one with evidence, one whose only
labelled turns are distractors, and one with no labelled turn (noise).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def _sessions(root: Path, user: str) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for line in (root / "histories" / f"{user}.jsonl").read_text(encoding="utf-8").splitlines():
        t = json.loads(line)
        out.setdefault(t["session_id"], []).append(t)
    return out


def _labels(root: Path, user: str) -> dict[str, str]:
    """Turn id -> what the build labels it (evidence: the dimension; distractor: its form)."""
    out: dict[str, str] = {}
    for line in (root / "answer_key.jsonl").read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        if rec["instance_id"].startswith(user + "-"):
            for e in rec["evidence"]:
                out[e["turn_id"]] = f"evidence: {e['dimension']}"
    path = root / "distractors.jsonl"
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            d = json.loads(line)
            if d["user_id"] == user:
                out.setdefault(d["turn_id"], f"distractor: {d['form']}")
    return out


def pick(sessions: dict[str, list[dict]], labels: dict[str, str]) -> dict[str, str]:
    kinds: dict[str, list[tuple[int, str]]] = {"evidence": [], "distractor": [], "noise": []}
    for sid, turns in sessions.items():
        found = {labels[t["id"]].split(":")[0] for t in turns if t["id"] in labels}
        kind = "evidence" if "evidence" in found else "distractor" if found else "noise"
        if len(turns) >= 8:
            kinds[kind].append((len(turns), sid))
    return {k: min(v)[1] for k, v in kinds.items() if v}


def _block(turns: list[dict], labels: dict[str, str]) -> str:
    lines = []
    for t in turns:
        mark = f"  [{labels[t['id']]}]" if t["id"] in labels else ""
        lines.append(f"{t['role']}: {t['text']}{mark}")
    return "```text\n" + "\n".join(lines) + "\n```"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--v2", type=Path, required=True)
    p.add_argument("--v3", type=Path, required=True)
    p.add_argument("--user", default="u0000")
    p.add_argument("--out", type=Path, default=Path("docs/histories.md"))
    args = p.parse_args(argv)
    m2, m3 = (json.loads((r / "manifest.json").read_text()) for r in (args.v2, args.v3))
    if (m2["seed"], m2["params"]["preset"]) != (m3["seed"], m3["params"]["preset"]):
        raise SystemExit("the two builds must share preset and seed")
    s2, s3 = _sessions(args.v2, args.user), _sessions(args.v3, args.user)
    l2, l3 = _labels(args.v2, args.user), _labels(args.v3, args.user)
    chosen = pick(s3, l3)
    out = [
        "# What a history reads like: generator v2 and v3 side by side",
        "",
        f"Written by `python tools/sample_histories.py` from two builds of `iba build --preset {m3['params']['preset']} "
        f"--seed {m3['seed']}`: `--generator 2` and the default, generator 3 (issue 32). The plan is the same, so each "
        f"session below is the same session of user `{args.user}` (its kind, length, day and labelled turns) written by "
        "each generator; the text is verbatim. Labelled turns carry their label in brackets (not part of the text). "
        "The coherence figures of both builds are in bench/BENCHMARKS.md (`bench/coherence.py`).",
        "",
    ]
    for kind, sid in chosen.items():
        out += [f"## {'An' if kind[0] in 'aeiou' else 'A'} {kind} session: `{sid}` ({len(s3[sid])} turns)", "", "### generator 2", "", _block(s2[sid], l2), "",
                "### generator 3", "", _block(s3[sid], l3), ""]
    args.out.write_text("\n".join(out), encoding="utf-8")
    print(f"wrote {args.out}: sessions {', '.join(chosen.values())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
