"""How far the plan alone tells evidence turns from distractor turns (issue 32's style audit).

  python bench/style_floor.py DIR [--personas 40]

The style audit (iba.construct.style_audit) scores the text of user turns. Its character n-grams
also read which scenario and dimension a cue is about, and that is fixed by the plan, not by the
writer: distractors may not touch a task's dimensions, so some scenarios' preferences are evidence
every time and others nearly never. This script gives the audit's classifier (logistic regression,
C 1, liblinear) only each labelled turn's scenario and dimension (one-hot), on the audit's split (the
same personas, seed 0, 5 folds by persona), and prints the AUC evidence vs distractors (per
distractor form too) and each scenario's share of evidence among its labelled turns: a text whose
n-grams name its cue's scenario cannot score below this by form alone.
"""

from __future__ import annotations

import argparse
import json
import random
from collections import Counter
from pathlib import Path

import numpy as np


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("root", type=Path, help="a build (iba build --out DIR)")
    p.add_argument("--personas", type=int, default=40, help="personas audited (the style audit's default: 40)")
    args = p.parse_args()
    from sklearn.feature_extraction import DictVectorizer
    from sklearn.linear_model import LogisticRegression

    from iba.construct import style_audit
    from iba.construct.stats import auc
    from iba.dataset import Dataset

    ds = Dataset(args.root)
    keys = ds.answer_keys()
    rows: dict[str, tuple[str, dict[str, int], bool, str]] = {}  # turn id -> user, features, evidence, form
    for tv in ds.instances:
        for lab in keys[tv.instance_id].evidence:
            rows.setdefault(lab.turn_id, (tv.user_id, {"s=" + tv.scenario: 1, "d=" + lab.dimension: 1}, True, "evidence"))
    with (args.root / "distractors.jsonl").open(encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            rows.setdefault(d["turn_id"], (d["user_id"], {"s=" + d["scenario"]: 1, "d=" + d["dimension"]: 1}, False, d["form"]))
    # the audit's personas and folds: users with evidence, shuffled with seed 0, the first N
    users = sorted({u for u, _, e, _ in rows.values() if e})
    random.Random(0).shuffle(users)
    fold = {u: i % style_audit.FOLDS for i, u in enumerate(users[: args.personas])}
    picked = [r for r in rows.values() if r[0] in fold]
    x = DictVectorizer().fit_transform([r[1] for r in picked])
    y = np.array([r[2] for r in picked])
    folds = np.array([fold[r[0]] for r in picked])
    forms = np.array([r[3] for r in picked])
    s = np.zeros(len(y))
    for k in range(style_audit.FOLDS):
        clf = LogisticRegression(C=style_audit.C, solver="liblinear").fit(x[folds != k], y[folds != k])
        s[folds == k] = clf.decision_function(x[folds == k])
    per_form = {m: round(auc(s[y], s[forms == m]), 4) for m in sorted(set(forms[~y]))}
    print(f"scenario and dimension alone, {len(fold)} personas, {int(y.sum())} evidence and {int((~y).sum())} distractor turns: "
          f"AUC evidence vs distractors {auc(s[y], s[~y]):.4f}; per form {per_form}")
    ev, dis = Counter(), Counter()
    for _, feats, e, _ in rows.values():  # the whole build
        scen = next(k[2:] for k in feats if k.startswith("s="))
        (ev if e else dis)[scen] += 1
    shares = sorted((ev[k] / (ev[k] + dis[k]), k) for k in ev.keys() | dis.keys())
    total = sum(ev.values()) / (sum(ev.values()) + sum(dis.values()))
    print(f"share of evidence among a scenario's labelled turns (whole build; overall {total:.3f}):")
    for share, k in shares[:5] + shares[-5:]:
        print(f"  {k}: {share:.3f} ({ev[k]} evidence, {dis[k]} distractor turns)")


if __name__ == "__main__":
    main()
