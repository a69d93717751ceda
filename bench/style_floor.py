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

It also prints what the plan holds fixed: the evidence turns whose (scenario, dimension) no distractor
ever voices (the answer key's safety rules keep a key off every persona's distractor pool when it shares
a generic facet, e.g. a budget or a time of day, with a dimension of one of its tasks), and the audit's
own text classifier scored *within* keys: the AUC over the pairs of one evidence and one distractor turn
of the same (scenario, dimension) and fold, pooled (a stratified AUC): how far the writing tells evidence
from distractors where their content is the same preference dimension (the plan alone scores 0.5 there).
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
    if not (args.root / "distractors.jsonl").exists():
        raise SystemExit(f"{args.root}: no distractors.jsonl (an iba build with distractors has one; imports such as "
                         "PrefEval's label no distractors, so there is nothing to separate evidence from)")
    with (args.root / "distractors.jsonl").open(encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            rows.setdefault(d["turn_id"], (d["user_id"], {"s=" + d["scenario"]: 1, "d=" + d["dimension"]: 1}, False, d["form"]))
    # the audit's personas and folds: users with evidence, shuffled with seed 0, the first N
    users = sorted({u for u, _, e, _ in rows.values() if e})
    random.Random(0).shuffle(users)
    n_folds = min(style_audit.FOLDS, len(users[: args.personas]))  # as the audit: fewer personas, fewer folds
    if n_folds < 2:
        raise SystemExit(f"{args.root}: needs at least 2 personas with evidence")
    fold = {u: i % n_folds for i, u in enumerate(users[: args.personas])}
    picked = [r for r in rows.values() if r[0] in fold]
    x = DictVectorizer().fit_transform([r[1] for r in picked])
    y = np.array([r[2] for r in picked])
    folds = np.array([fold[r[0]] for r in picked])
    forms = np.array([r[3] for r in picked])
    s = np.zeros(len(y))
    for k in range(n_folds):
        clf = LogisticRegression(C=style_audit.C, solver="liblinear").fit(x[folds != k], y[folds != k])
        s[folds == k] = clf.decision_function(x[folds == k])
    per_form = {m: round(auc(s[y], s[forms == m]), 4) for m in sorted(set(forms[~y]))}
    print(f"scenario and dimension alone, {len(fold)} personas, {int(y.sum())} evidence and {int((~y).sum())} distractor turns: "
          f"AUC evidence vs distractors {auc(s[y], s[~y]):.4f}; per form {per_form}")
    _within_key(args.root, rows, fold, s, y, picked)
    ev, dis = Counter(), Counter()
    for _, feats, e, _ in rows.values():  # the whole build
        scen = next(k[2:] for k in feats if k.startswith("s="))
        (ev if e else dis)[scen] += 1
    shares = sorted((ev[k] / (ev[k] + dis[k]), k) for k in ev.keys() | dis.keys())
    total = sum(ev.values()) / (sum(ev.values()) + sum(dis.values()))
    print(f"share of evidence among a scenario's labelled turns (whole build; overall {total:.3f}):")
    for share, k in shares[:5] + shares[-5:]:
        print(f"  {k}: {share:.3f} ({ev[k]} evidence, {dis[k]} distractor turns)")


def _within_key(root: Path, rows: dict, fold: dict[str, int], plan_scores: np.ndarray, y: np.ndarray, picked: list) -> None:
    from scipy import sparse
    from sklearn.feature_extraction.text import HashingVectorizer, TfidfTransformer
    from sklearn.preprocessing import StandardScaler

    from iba.construct import style_audit
    from iba.dataset import Dataset

    ev_keys, dis_keys = Counter(), Counter()
    for _, feats, e, _ in rows.values():
        (ev_keys if e else dis_keys)[tuple(sorted(feats))] += 1
    unvoiced = sum(n for k, n in ev_keys.items() if not dis_keys[k])
    print(f"evidence turns whose (scenario, dimension) no distractor voices: {unvoiced} of {sum(ev_keys.values())} "
          f"({unvoiced / sum(ev_keys.values()):.1%}; whole build)")
    # the audit's text classifier on the audited personas' labelled turns (noise left out: not a class here)
    ds = Dataset(root)
    turns = {t.id: t.text for u in fold for t in ds.history(u) if t.role == "user"}
    ids = [tid for tid, r in rows.items() if r[0] in fold]
    texts = [turns[tid] for tid in ids]
    yy = np.array([rows[tid][2] for tid in ids])
    ff = np.array([fold[rows[tid][0]] for tid in ids])
    grams = HashingVectorizer(analyzer="char_wb", ngram_range=(2, 4), lowercase=False, alternate_sign=False, norm=None,
                              n_features=style_audit.N_FEATURES, dtype=np.float32).transform(texts)
    form = StandardScaler().fit_transform(np.array([style_audit.form_features(t) for t in texts]))
    x = sparse.hstack([TfidfTransformer(sublinear_tf=True).fit_transform(grams), sparse.csr_matrix(form)]).tocsr()
    text_scores = style_audit._out_of_fold(x, yy, ff, 0)
    if text_scores is None:
        print("text: not scored (a fold's training part lacks evidence or distractors)")
        return
    # pairs of one fold only: each fold's scores come from its own model
    keys = [(tuple(sorted(rows[tid][1])), fold[rows[tid][0]]) for tid in ids]
    plan_keys = [(tuple(sorted(r[1])), fold[r[0]]) for r in picked]
    from iba.construct.stats import auc

    users = [rows[tid][0] for tid in ids]
    plan_users = [r[0] for r in picked]
    for name, sc, yv, ks, us in (("text (the style audit's classifier)", text_scores, yy, keys, users),
                                 ("plan alone", plan_scores, y, plan_keys, plan_users)):
        # every (evidence, distractor) pair of one stratum: who each turn's persona is, and who wins
        pe, pd, win = [], [], []
        strata: dict = {}
        for i, k in enumerate(ks):
            strata.setdefault(k, ([], []))[0 if yv[i] else 1].append(i)
        for e, d in strata.values():
            for i in e:
                for j in d:
                    pe.append(us[i])
                    pd.append(us[j])
                    win.append(1.0 if sc[i] > sc[j] else 0.5 if sc[i] == sc[j] else 0.0)
        if not win:
            print(f"{name}: AUC evidence vs distractors {auc(sc[yv], sc[~yv]):.4f} overall; no pairs within (scenario, dimension)")
            continue
        w = np.array(win)
        # a 95% interval by resampling personas (2,000 draws, seed 0): pairs weigh by how often each side's persona is drawn
        names = sorted(set(us))
        col = {u: i for i, u in enumerate(names)}
        ie, idd = np.array([col[u] for u in pe]), np.array([col[u] for u in pd])
        rng = np.random.default_rng(0)
        draws = []
        for _ in range(2000):
            m = np.bincount(rng.integers(0, len(names), len(names)), minlength=len(names))
            pw = m[ie] * m[idd]
            if pw.sum():
                draws.append(float((pw * w).sum() / pw.sum()))
        lo, hi = np.percentile(draws, [2.5, 97.5])
        print(f"{name}: AUC evidence vs distractors {auc(sc[yv], sc[~yv]):.4f} overall, {w.mean():.4f} [{lo:.4f}, {hi:.4f}] "
              f"within (scenario, dimension) ({len(w)} pairs of one fold, {len(names)} personas)")

if __name__ == "__main__":
    main()
