"""The tell audit: can wording alone find the evidence?

A benchmark whose evidence a bag of words can find measures wording, not implicit alignment. The
audit trains a lexical classifier (TF-IDF of word 1-2-grams, logistic regression with
scikit-learn's default regularisation; the `audit` extra) to tell evidence turns (every turn the answer key cites) from the other user turns,
on the histories of some personas, and tests it on others':

- precision at N: of the N user turns it ranks highest (N = the evidence turns of the test
  personas), the share that are evidence (random ranking: the evidence share, ~1-2%);
- AUC evidence vs all other user turns (real text scores high too: preference talk reads unlike
  other talk), and AUC evidence vs distractor preferences (where the dataset has them): only
  meaning should tell those apart;
- the n-grams that weigh most towards "evidence" (what a reader would call the tells).

It also measures how often sentences repeat: per history, the share of user sentences longer than
25 characters whose text occurs 10 or more times in that history (median over histories), and the
most times any sentence that long occurs in one history (the builder bounds it, see
iba.construct.sentences). Personas are split at random with a seed, so the figures are reproducible.
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from pathlib import Path
from statistics import median
from typing import Any

import numpy as np

from iba.construct.sentences import LONG, sentences

MAX_PERSONAS = 60  # audited personas (train on 2/3, test on 1/3): the 40 + 20
C = 1.0  # scikit-learn's default regularisation: the audit is an off-the-shelf classifier, not one tuned to either side
TRAIN_SHARE = 2 / 3
RECUR = 10  # "recurs": a sentence occurring this many times or more in one history
TOP_FEATURES = 12
N_FEATURES = 1 << 20


def _auc(pos: np.ndarray, neg: np.ndarray) -> float | None:
    from iba.construct.stats import auc

    return round(auc(pos, neg), 4) if len(pos) and len(neg) else None


def _user_turns(path: Path) -> list[tuple[str, str, str]]:
    out = []
    with path.open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                t = json.loads(line)
                out.append((t["id"], t["role"], t["text"]))
    return out


def recurrence(turns: list[tuple[str, str, str]]) -> tuple[float, int]:
    """(share of the user's long sentence occurrences that recur >= RECUR times, the most times
    any long sentence of either role occurs) for one history."""
    user: Counter[str] = Counter()
    every: Counter[str] = Counter()
    for _, role, text in turns:
        for s in sentences(text):
            if len(s) > LONG:
                key = " ".join(s.lower().split())
                every[key] += 1
                if role == "user":
                    user[key] += 1
    total = sum(user.values())
    share = sum(n for n in user.values() if n >= RECUR) / total if total else 0.0
    return share, max(every.values(), default=0)


def audit_users(root: str | Path, evidence: dict[str, set[str]], *, seed: int = 0, max_personas: int = MAX_PERSONAS) -> list[str]:
    """The audited personas: up to `max_personas` of those with evidence and a history, drawn with `seed`."""
    users = sorted(u for u in evidence if (Path(root) / "histories" / f"{u}.jsonl").exists())
    random.Random(seed).shuffle(users)
    return users[:max_personas]


def recurrence_figures(root: str | Path, users: list[str]) -> dict[str, Any]:
    """How often sentences recur in the histories of `users` (see `recurrence`)."""
    shares, maxima = [], []
    for u in users:
        share, most = recurrence(_user_turns(Path(root) / "histories" / f"{u}.jsonl"))
        shares.append(share)
        maxima.append(most)
    return {
        "threshold": RECUR,
        "long_chars": LONG,
        "median_share": round(median(shares), 4) if shares else None,
        "max_repeats": max(maxima, default=0),
    }


def audit(root: str | Path, evidence: dict[str, set[str]], distractors: dict[str, dict[str, str]] | None = None, *,
          seed: int = 0, max_personas: int = MAX_PERSONAS) -> dict[str, Any]:
    """The tell audit of the dataset at `root`. `evidence`: user id -> the turn ids its answer keys
    cite; `distractors`: user id -> its distractor turn ids -> their form (None or empty: none)."""
    with PendingAudit(root, evidence, seed=seed, max_personas=max_personas) as pending:
        return pending.result(distractors)


class PendingAudit:
    """The audit, begun: with `worker`, the classifier's training (the longest part) runs in a
    forked process from now on, and `result()` computes the recurrence figures and the test
    split's features here, then scores the test split with the trained model (what the caller does
    in between runs beside the training too). The same figures either way. A context manager:
    leaving it ends the worker."""

    def __init__(self, root: str | Path, evidence: dict[str, set[str]], *, seed: int = 0, max_personas: int = MAX_PERSONAS,
                 worker: bool = False) -> None:
        from iba.construct.workers import InWorker

        self.root, self.evidence, self.seed = Path(root), evidence, seed
        self.users = audit_users(root, evidence, seed=seed, max_personas=max_personas)
        self.train, self.test = _split(self.users)
        self._worker = InWorker(_fit, self.root, self.train, evidence, seed=seed) if worker and self.test else None

    def result(self, distractors: dict[str, dict[str, str]] | None = None) -> dict[str, Any]:
        """The audit's figures; `distractors`: user id -> its distractor turn ids -> their form
        (None or empty: none; only the test split's are read, so they may come after the start)."""
        out: dict[str, Any] = {"personas": len(self.users), "seed": self.seed, "recurrence": recurrence_figures(self.root, self.users)}
        if not self.train or not self.test:
            out["classifier"] = {"available": False, "reason": f"needs at least 2 personas with evidence, has {len(self.users)}"}
            return out
        test = _features(self.root, self.test, self.evidence, distractors)
        fitted = self._worker.result() if self._worker else _fit(self.root, self.train, self.evidence, seed=self.seed)
        out["classifier"] = _score(fitted, test, len(self.train), len(self.test))
        return out

    def close(self) -> None:
        if self._worker:
            self._worker.close()

    def __enter__(self) -> PendingAudit:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_TOKEN = re.compile(r"(?u)\b\w\w+\b")  # scikit-learn's default token pattern


def _ngrams(text: str) -> list[str]:
    """The word 1- and 2-grams of `text` exactly as HashingVectorizer(ngram_range=(1, 2)) analyses
    it by default (lower case, its token pattern; unigrams, then bigrams), without its generic
    machinery: the audit hashes ~150,000 turns (tests/construct/test_tell_audit.py compares)."""
    tokens = _TOKEN.findall(text.lower())
    return tokens + [f"{a} {b}" for a, b in zip(tokens, tokens[1:])]


def _hasher() -> Any:
    """Hashed n-grams: no vocabulary of every bigram of ~100,000 turns in memory (that alone took
    ~400 MB at full size); 2^20 buckets keep collisions negligible."""
    from sklearn.feature_extraction.text import HashingVectorizer

    return HashingVectorizer(analyzer=_ngrams, alternate_sign=False, norm=None, n_features=N_FEATURES, dtype=np.float32)


def _split(users: list[str]) -> tuple[list[str], list[str]]:
    """(train, test): the first 2/3 of the audited personas, the rest (both empty when either would be)."""
    n_train = int(round(len(users) * TRAIN_SHARE))
    if n_train < 1 or len(users) - n_train < 1:
        return [], []
    return users[:n_train], users[n_train:]


def _rows(root: Path, part: list[str], evidence: dict[str, set[str]], distractors: dict[str, dict[str, str]] | None
          ) -> tuple[list[str], np.ndarray, np.ndarray, list[str]]:
    """The user turns of `part`'s histories: texts, is evidence, is a distractor (not evidence), its form."""
    texts, is_ev, is_dis, forms = [], [], [], []
    for u in part:
        ev, dis = evidence.get(u, set()), (distractors or {}).get(u, {})
        for tid, role, text in _user_turns(root / "histories" / f"{u}.jsonl"):
            if role == "user":
                texts.append(text)
                is_ev.append(tid in ev)
                is_dis.append(tid in dis and tid not in ev)
                forms.append(dis.get(tid, ""))
    return texts, np.array(is_ev, dtype=bool), np.array(is_dis, dtype=bool), forms


def _features(root: Path, test: list[str], evidence: dict[str, set[str]], distractors: dict[str, dict[str, str]] | None
              ) -> tuple[Any, np.ndarray, np.ndarray, list[str]] | None:
    """The test split: hashed n-gram counts and its labels (None without scikit-learn)."""
    try:
        hasher = _hasher()
    except ImportError:
        return None
    x_test, y_test, dis_test, forms_test = _rows(root, test, evidence, distractors)
    return hasher.transform(x_test), y_test, dis_test, forms_test


def _fit(root: Path, train: list[str], evidence: dict[str, set[str]], *, seed: int = 0) -> tuple[Any, Any, Any] | str:
    """(tf-idf, logistic regression, n-grams of the training evidence) trained on `train`'s user
    turns, or why not (a reason)."""
    try:
        from sklearn.feature_extraction.text import CountVectorizer, TfidfTransformer
        from sklearn.linear_model import LogisticRegression
        hasher = _hasher()
    except ImportError:
        return "scikit-learn is not installed: pip install 'iba[audit]'"
    x_train, y_train, _, _ = _rows(root, train, evidence, None)
    if y_train.sum() == 0 or y_train.all():
        return "a split has no evidence turns (or nothing else)"
    # names for the heaviest buckets: the n-grams of the training evidence turns, hashed the same way
    ev_vocab = CountVectorizer(ngram_range=(1, 2), lowercase=True).fit([x for x, e in zip(x_train, y_train) if e]).get_feature_names_out()
    tfidf = TfidfTransformer(sublinear_tf=True)
    xt = tfidf.fit_transform(hasher.transform(x_train))
    del x_train  # each stage's data is freed once used: the full build's peak memory is here
    clf = LogisticRegression(C=C, max_iter=2000, solver="liblinear", random_state=seed)
    clf.fit(xt, y_train)
    return tfidf, clf, ev_vocab


def _score(fitted: tuple[Any, Any, Any] | str, test: tuple[Any, np.ndarray, np.ndarray, list[str]] | None, n_train: int,
           n_test: int) -> dict[str, Any]:
    """The classifier's figures on the test split (`n_train`, `n_test`: personas in each)."""
    if isinstance(fitted, str):
        return {"available": False, "reason": fitted}
    assert test is not None  # scikit-learn trained the model, so it hashed the test split too
    tfidf, clf, ev_vocab = fitted
    x_test, y_test, dis_test, forms_test = test
    if y_test.sum() == 0:
        return {"available": False, "reason": "a split has no evidence turns (or nothing else)"}
    from sklearn.feature_extraction.text import HashingVectorizer

    scores = clf.decision_function(tfidf.transform(x_test))
    n = int(y_test.sum())
    top = np.argsort(-scores, kind="mergesort")[:n]
    # each n-gram hashed as one feature string (the way the hasher hashes the n-grams it extracts)
    index = HashingVectorizer(analyzer=lambda g: [g], alternate_sign=False, norm=None, n_features=N_FEATURES).transform(ev_vocab).indices
    weights = clf.coef_[0]
    named = sorted(((float(weights[i]), str(g)) for g, i in zip(ev_vocab, index)), reverse=True)
    return {
        "available": True,
        "model": f"tfidf of hashed word 1-2-grams (2^20, sublinear tf) + logistic regression (C {C}, liblinear)",
        "train_personas": n_train,
        "test_personas": n_test,
        "test_user_turns": int(len(y_test)),
        "test_evidence_turns": n,
        "test_distractor_turns": int(dis_test.sum()),
        "evidence_share": round(n / len(y_test), 4),
        "precision_at_n": round(float(y_test[top].mean()), 4),
        "distractor_share_at_n": round(float(dis_test[top].mean()), 4),
        "auc_evidence_vs_rest": _auc(scores[y_test], scores[~y_test]),
        "auc_evidence_vs_distractors": _auc(scores[y_test], scores[dis_test]) if dis_test.any() else None,
        "auc_evidence_vs_distractor_form": {
            f: _auc(scores[y_test], scores[dis_test & (np.array(forms_test) == f)]) for f in sorted({x for x in forms_test if x})
        },
        "top_evidence_features": [g for _, g in named[:TOP_FEATURES]],
    }


# Targets of issue 24 ("IBA-Bench hard for the right reasons"), checked in the tests and shown by
# `iba stats`: bounds a benchmark should meet, not values tuned to pass.
TARGETS = {"precision_at_n": 0.30, "auc_evidence_vs_distractors": 0.70, "recurrence_median_share": 0.05}


def format_audit(a: dict[str, Any]) -> list[str]:
    """The audit as a few lines of text (for `iba stats` and the build summary)."""
    r = a.get("recurrence", {})
    lines = [
        f"sentence recurrence: median share of user sentences over {r.get('long_chars')} chars recurring "
        f">= {r.get('threshold')} times in a history {r.get('median_share')} (target <= {TARGETS['recurrence_median_share']}); "
        f"most repeats of one such sentence {r.get('max_repeats')} ({a.get('personas')} personas audited)"
    ]
    c = a.get("classifier", {})
    if not c.get("available"):
        lines.append(f"lexical tell audit: not run ({c.get('reason')})")
        return lines
    vs_d = c["auc_evidence_vs_distractors"]
    lines.append(
        f"lexical tell audit (train {c['train_personas']} personas, test {c['test_personas']}): precision at N={c['test_evidence_turns']} "
        f"{c['precision_at_n']} (target <= {TARGETS['precision_at_n']}; evidence share {c['evidence_share']}); "
        f"AUC evidence vs rest {c['auc_evidence_vs_rest']}; AUC evidence vs distractors "
        f"{'-' if vs_d is None else vs_d} (target <= {TARGETS['auc_evidence_vs_distractors']})"
    )
    if c.get("top_evidence_features"):  # a public (held-back) export leaves them out: read off the key
        lines.append("  strongest evidence n-grams: " + ", ".join(repr(f) for f in c["top_evidence_features"]))
    return lines
