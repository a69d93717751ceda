"""The style audit: does the way a turn is written tell evidence from distractors and from noise?

The tell audit (iba.construct.tell_audit) asks whether words find the evidence. A writer also
leaves traces in form: a model's exchanges can read unlike procedural filler, and a template bank
like itself, so that a reader who never looks at the meaning could still pick out the preference
turns that matter (in an LLM build whose distractors were procedural, style alone told them
apart). The audit trains an off-the-shelf classifier on the form of user turns:

- character 2-4-grams inside word boundaries, case kept (hashed, tf-idf): spelling, capitals,
  contractions, the texture of a writer's phrasing;
- length (characters, words, sentences, mean word length) and punctuation (the rate of each mark,
  capitals and digits, how the turn ends);

with a logistic regression (scikit-learn's default regularisation), scored across personas
(k folds by persona: every turn is scored by a model that never saw its persona's history), and
reports the AUC of three separations with a 95% interval (Hanley and McNeil's, which treats the
pooled out-of-fold scores as independent): evidence vs distractors, evidence vs noise, distractors
vs noise; and the same with length and punctuation alone ("form only", no n-grams). Target: at
most 0.65 (the issue's). Character n-grams also carry words: where meaning differs (preference
talk against small talk), they separate by content too, which the form-only figure leaves out.
"""

from __future__ import annotations

import math
import random
import re
from pathlib import Path
from typing import Any

import numpy as np

MAX_PERSONAS = 40
FOLDS = 5
MAX_NOISE = 10_000  # noise user turns sampled over the audited personas (the rest add nothing to an AUC)
MIN_TURNS = 10  # per class: fewer and the audit is "not run"
C = 1.0
N_FEATURES = 1 << 18
TARGET = 0.65
PAIRS = (("evidence", "distractors"), ("evidence", "noise"), ("distractors", "noise"))
MARKS = ".,!?;:'\"-()/…"
_SENTENCE_END = re.compile(r"[.!?…]+(\s|$)")


def form_features(text: str) -> list[float]:
    """Length and punctuation of one turn."""
    n = max(1, len(text))
    words = text.split()
    end = text.rstrip()[-1:]
    return [
        math.log1p(len(text)),
        math.log1p(len(words)),
        float(len(_SENTENCE_END.findall(text)) or 1),
        sum(len(w) for w in words) / max(1, len(words)),
        *(text.count(m) / n for m in MARKS),
        sum(c.isupper() for c in text) / n,
        sum(c.isdigit() for c in text) / n,
        float(text[:1].isupper()),
        float(end == "."), float(end == "?"), float(end == "!"), float(end.isalnum()),
    ]


def _hanley_mcneil(auc: float, n1: int, n2: int) -> tuple[float, float]:
    q1, q2 = auc / (2 - auc), 2 * auc * auc / (1 + auc)
    se = math.sqrt(max(0.0, (auc * (1 - auc) + (n1 - 1) * (q1 - auc * auc) + (n2 - 1) * (q2 - auc * auc)) / (n1 * n2)))
    return round(max(0.0, auc - 1.96 * se), 4), round(min(1.0, auc + 1.96 * se), 4)


def _user_turns(ds: Any, users: list[str], evidence: dict[str, set[str]], distractors: dict[str, dict[str, str]],
                rng: random.Random) -> tuple[list[str], list[str], list[int]]:
    """(texts, class of each, fold of each) of the audited personas' user turns, noise sampled."""
    texts, kinds, folds, noise = [], [], [], []
    for i, u in enumerate(users):
        ev, dis = evidence.get(u, set()), distractors.get(u, {})
        for t in ds.history(u):
            if t.role != "user":
                continue
            kind = "evidence" if t.id in ev else "distractors" if t.id in dis else "noise"
            if kind == "noise":
                noise.append((t.text, i % FOLDS))
            else:
                texts.append(t.text)
                kinds.append(kind)
                folds.append(i % FOLDS)
    for text, fold in rng.sample(noise, min(MAX_NOISE, len(noise))):
        texts.append(text)
        kinds.append("noise")
        folds.append(fold)
    return texts, kinds, folds


def _out_of_fold(x: Any, y: np.ndarray, folds: np.ndarray, seed: int) -> np.ndarray | None:
    """Each row's score from a model trained on the other folds; None if a training part lacks a class."""
    from sklearn.linear_model import LogisticRegression

    scores = np.zeros(len(y))
    for f in np.unique(folds):
        train, test = folds != f, folds == f
        if len(np.unique(y[train])) < 2:
            return None
        clf = LogisticRegression(C=C, max_iter=2000, solver="liblinear", random_state=seed)
        clf.fit(x[train], y[train])
        scores[test] = clf.decision_function(x[test])
    return scores


def audit(root: str | Path, evidence: dict[str, set[str]], distractors: dict[str, dict[str, str]] | None = None, *,
          seed: int = 0, max_personas: int = MAX_PERSONAS) -> dict[str, Any]:
    """The style audit of the dataset at `root`. `evidence`: user id -> the turn ids its answer keys
    cite; `distractors`: user id -> its distractor turn ids -> their form."""
    from iba.construct.stats import auc as auc_of
    from iba.dataset import Dataset

    ds = Dataset(root)
    users = sorted(u for u in evidence if ds.history_path(u).exists())
    rng = random.Random(seed)
    rng.shuffle(users)
    users = users[:max_personas]
    n_folds = min(FOLDS, len(users))
    out: dict[str, Any] = {"target": TARGET, "personas": len(users), "folds": n_folds, "seed": seed}
    if len(users) < 2:
        return {**out, "available": False, "reason": f"needs at least 2 personas with evidence, has {len(users)}"}
    texts, kinds, fold_list = _user_turns(ds, users, evidence, distractors or {}, rng)
    k = np.array(kinds)
    folds = np.array(fold_list) % n_folds
    counts = {c: int((k == c).sum()) for c in ("evidence", "distractors", "noise")}
    out["turns"] = counts
    small = [c for c in ("evidence", "noise") if counts[c] < MIN_TURNS]
    if small:
        return {**out, "available": False, "reason": f"too few {' and '.join(small)} turns (needs {MIN_TURNS} of each)"}
    try:
        from scipy import sparse
        from sklearn.feature_extraction.text import HashingVectorizer, TfidfTransformer
        from sklearn.preprocessing import StandardScaler
    except ImportError:
        return {**out, "available": False, "reason": "scikit-learn is not installed: pip install 'iba[audit]'"}
    grams = HashingVectorizer(analyzer="char_wb", ngram_range=(2, 4), lowercase=False, alternate_sign=False, norm=None,
                              n_features=N_FEATURES, dtype=np.float32).transform(texts)
    form = np.array([form_features(t) for t in texts], dtype=np.float64)
    pairs: dict[str, Any] = {}
    for a, b in PAIRS:
        rows = (k == a) | (k == b)
        if min(counts[a], counts[b]) < MIN_TURNS:
            pairs[f"{a}_vs_{b}"] = {"available": False, "reason": f"fewer than {MIN_TURNS} {a if counts[a] < MIN_TURNS else b} turns"}
            continue
        y, f = (k[rows] == a), folds[rows]
        # the tf-idf weights and the scaling are fitted on all rows of the pair: unsupervised, no labels
        x_form = StandardScaler().fit_transform(form[rows])
        x_all = sparse.hstack([TfidfTransformer(sublinear_tf=True).fit_transform(grams[rows]), sparse.csr_matrix(x_form)]).tocsr()
        row: dict[str, Any] = {"n": [int(y.sum()), int((~y).sum())]}
        for name, x in (("auc", x_all), ("form_only_auc", x_form)):
            s = _out_of_fold(x, y, f, seed)
            row[name] = None if s is None else round(auc_of(s[y], s[~y]), 4)
        if row["auc"] is not None:
            row["ci95"] = list(_hanley_mcneil(row["auc"], *row["n"]))
        pairs[f"{a}_vs_{b}"] = row
    return {
        **out,
        "available": True,
        "model": f"hashed character 2-4-grams (2^18, word-bounded, case kept, tf-idf) + length and punctuation (standardised); "
                 f"logistic regression (C {C}, liblinear); {n_folds} folds by persona",
        "pairs": pairs,
    }


def format_audit(a: dict[str, Any]) -> list[str]:
    """The audit as text lines (for `iba stats` and the build summary)."""
    if not a.get("available"):
        return [f"style audit: not run ({a.get('reason')})"]
    t = a["turns"]
    parts, form = [], []
    for name, label in (("evidence_vs_distractors", "evidence vs distractors"), ("evidence_vs_noise", "evidence vs noise"),
                        ("distractors_vs_noise", "distractors vs noise")):
        p = a["pairs"][name]
        if p.get("auc") is None:
            parts.append(f"{label} -")
            form.append("-")
            continue
        flag = "" if p["auc"] <= a["target"] else " (over)"
        parts.append(f"{label} {p['auc']} [{p['ci95'][0]}, {p['ci95'][1]}]{flag}")
        form.append(str(p["form_only_auc"]))
    return [
        f"style audit (character n-grams, length, punctuation; {a['folds']} folds by persona over {a['personas']} personas; "
        f"{t['evidence']} evidence, {t['distractors']} distractor, {t['noise']} sampled noise user turns): AUC "
        + ", ".join(parts) + f" (target <= {a['target']}); length and punctuation alone: " + " / ".join(form),
    ]
