"""Inter-rater agreement statistics (paper Appendix B.1, Table 11; judge panels in Appendix D).

Pure functions over plain label lists, no numpy needed. Two input shapes:

- two raters: `a` and `b`, equal-length sequences of labels, one per item;
- a panel: `ratings`, one row per item holding one label per rater (rows may differ in length).

Labels are any hashable values (bools, ints, strings). `None` is a missing rating:

- two-rater functions drop an item when either rating is None (pairwise deletion);
- panel functions drop the None entries of a row, then drop rows left with fewer than two
  ratings (a single rating cannot agree or disagree with anything). With this rule the panel
  statistics computed on two complete raters equal the two-rater statistics exactly.

Degenerate cases (documented choice, tested):

- no usable items: every function returns NaN (nothing to measure, and 0 would look like data);
- everyone used one and the same label: raw agreement and Gwet's AC1 return 1.0 (AC1's chance
  agreement is 0 when one category takes all ratings), while Cohen's kappa, Fleiss' kappa and
  Krippendorff's alpha return NaN because their expected (dis)agreement makes them 0/0. This is the
  "kappa paradox" that made the paper report AC1 for imbalanced labels.

Gwet's AC1 follows Gwet (2001; 2008, "Computing inter-rater reliability and its variance in the
presence of high agreement"): Pe = 1/(Q-1) * sum_q pi_q (1 - pi_q), where Q is the number of
categories and pi_q the share of all ratings in category q. Q is the number of categories in the
rating scale: pass `categories` when the scale has categories nobody used; by default it is the set
of observed labels, widened to {False, True} when all labels are bools.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Iterable, Sequence
from itertools import combinations
from typing import Literal

Label = Hashable
NAN = float("nan")


# --------------------------------------------------------------------------- helpers


def _pairs(a: Sequence[Label | None], b: Sequence[Label | None]) -> list[tuple[Label, Label]]:
    if len(a) != len(b):
        raise ValueError(f"raters rated different numbers of items ({len(a)} vs {len(b)})")
    return [(x, y) for x, y in zip(a, b) if x is not None and y is not None]


def _rows(ratings: Iterable[Sequence[Label | None]]) -> list[list[Label]]:
    """Rows with missing ratings removed; rows with fewer than two ratings dropped."""
    rows = []
    for row in ratings:
        kept = [x for x in row if x is not None]
        if len(kept) >= 2:
            rows.append(kept)
    return rows


def _categories(labels: Iterable[Label], categories: Iterable[Label] | None) -> list[Label]:
    if categories is not None:
        cats = list(dict.fromkeys(categories))
        unknown = set(labels) - set(cats)
        if unknown:
            raise ValueError(f"labels outside the declared categories: {sorted(map(str, unknown))}")
        return cats
    seen = list(dict.fromkeys(labels))
    if seen and all(isinstance(x, bool) for x in seen):
        return [False, True]
    return seen


def _gwet_pe(shares: dict[Label, float], q: int) -> float:
    if q < 2:
        return 0.0  # one category: nothing to agree on by chance beyond certainty; AC1 = Po
    return sum(p * (1.0 - p) for p in shares.values()) / (q - 1)


def _chance_corrected(po: float, pe: float) -> float:
    if math.isclose(pe, 1.0):
        return NAN
    return (po - pe) / (1.0 - pe)


# --------------------------------------------------------------------------- two raters


def raw_agreement(a: Sequence[Label | None], b: Sequence[Label | None]) -> float:
    """Share of items on which the two raters gave the same label (Po of Appendix B.1)."""
    pairs = _pairs(a, b)
    if not pairs:
        return NAN
    return sum(x == y for x, y in pairs) / len(pairs)


def gwet_ac1(
    a: Sequence[Label | None], b: Sequence[Label | None], categories: Iterable[Label] | None = None
) -> float:
    """Gwet's AC1 for two raters, binary or multi-category (see the module docstring)."""
    pairs = _pairs(a, b)
    if not pairs:
        return NAN
    n = len(pairs)
    po = sum(x == y for x, y in pairs) / n
    counts = Counter(x for pair in pairs for x in pair)
    cats = _categories(counts, categories)
    shares = {c: counts.get(c, 0) / (2 * n) for c in cats}
    return _chance_corrected(po, _gwet_pe(shares, len(cats)))


def cohen_kappa(a: Sequence[Label | None], b: Sequence[Label | None]) -> float:
    """Cohen's kappa: Pe = sum_q p_a(q) * p_b(q) from each rater's own marginals."""
    pairs = _pairs(a, b)
    if not pairs:
        return NAN
    n = len(pairs)
    po = sum(x == y for x, y in pairs) / n
    ca, cb = Counter(x for x, _ in pairs), Counter(y for _, y in pairs)
    pe = sum(ca[c] * cb.get(c, 0) for c in ca) / (n * n)
    return _chance_corrected(po, pe)


# --------------------------------------------------------------------------- panels


def pairwise_raw_agreement(ratings: Iterable[Sequence[Label | None]]) -> float:
    """Mean over items of the share of agreeing rater pairs (the Po of Fleiss and Gwet)."""
    rows = _rows(ratings)
    if not rows:
        return NAN
    total = 0.0
    for row in rows:
        m = len(row)
        total += sum(k * (k - 1) for k in Counter(row).values()) / (m * (m - 1))
    return total / len(rows)


def gwet_ac1_multi(
    ratings: Iterable[Sequence[Label | None]], categories: Iterable[Label] | None = None
) -> float:
    """Gwet's AC1 for any number of raters (Gwet 2008, eq. for r raters, missing allowed).

    Po = mean over items of sum_q r_iq (r_iq - 1) / (r_i (r_i - 1));
    pi_q = mean over items of r_iq / r_i; Pe = 1/(Q-1) * sum_q pi_q (1 - pi_q).
    """
    rows = _rows(ratings)
    if not rows:
        return NAN
    po = pairwise_raw_agreement(rows)
    cats = _categories((x for row in rows for x in row), categories)
    shares = {c: 0.0 for c in cats}
    for row in rows:
        for c, k in Counter(row).items():
            shares[c] += k / len(row)
    shares = {c: s / len(rows) for c, s in shares.items()}
    return _chance_corrected(po, _gwet_pe(shares, len(cats)))


def fleiss_kappa(ratings: Iterable[Sequence[Label | None]]) -> float:
    """Fleiss' kappa; rows may have different numbers of raters (then p_q pools all ratings).

    With a constant number of raters per item this is the textbook formula:
    Po = mean_i P_i, Pe = sum_q p_q^2 with p_q the share of all ratings in category q.
    """
    rows = _rows(ratings)
    if not rows:
        return NAN
    po = pairwise_raw_agreement(rows)
    counts = Counter(x for row in rows for x in row)
    total = sum(counts.values())
    pe = sum((k / total) ** 2 for k in counts.values())
    return _chance_corrected(po, pe)


def mean_pairwise_cohen(ratings: Sequence[Sequence[Label | None]]) -> float:
    """Mean Cohen's kappa over all rater pairs (columns); NaN pairs are left out of the mean."""
    if not ratings:
        return NAN
    width = max(len(r) for r in ratings)
    cols = [[r[j] if j < len(r) else None for r in ratings] for j in range(width)]
    vals = [cohen_kappa(x, y) for x, y in combinations(cols, 2)]
    vals = [v for v in vals if not math.isnan(v)]
    return sum(vals) / len(vals) if vals else NAN


Level = Literal["nominal", "ordinal", "interval", "ratio"]


def krippendorff_alpha(ratings: Iterable[Sequence[Label | None]], level: Level = "nominal") -> float:
    """Krippendorff's alpha = 1 - D_o / D_e from the coincidence matrix (Krippendorff 2011).

    Each item with m >= 2 ratings adds every ordered pair of its ratings with weight 1/(m-1).
    Levels other than "nominal" need numeric labels; "ordinal" ranks the observed values.
    """
    rows = _rows(ratings)
    if not rows:
        return NAN
    coinc: Counter[tuple[Label, Label]] = Counter()
    for row in rows:
        w = 1.0 / (len(row) - 1)
        for i, j in ((i, j) for i in range(len(row)) for j in range(len(row)) if i != j):
            coinc[(row[i], row[j])] += w
    n_c: Counter[Label] = Counter()
    for (c, _), v in coinc.items():
        n_c[c] += v
    n = sum(n_c.values())
    delta = _delta(level, n_c)
    values = list(n_c)
    d_o = sum(v * delta(c, k) for (c, k), v in coinc.items())
    d_e = sum(n_c[c] * n_c[k] * delta(c, k) for c in values for k in values) / (n - 1)
    if math.isclose(d_e, 0.0, abs_tol=1e-15):
        return NAN
    return 1.0 - d_o / d_e


def _delta(level: Level, n_c: Counter):
    """Squared difference function delta^2(c, k) for the measurement level."""
    if level == "nominal":
        return lambda c, k: 0.0 if c == k else 1.0
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in n_c):
        raise ValueError(f"level {level!r} needs numeric ratings")
    if level == "interval":
        return lambda c, k: float(c - k) ** 2
    if level == "ratio":
        return lambda c, k: 0.0 if c + k == 0 else ((c - k) / (c + k)) ** 2
    if level == "ordinal":
        order = sorted(n_c)
        rank = {v: i for i, v in enumerate(order)}

        def ordinal(c, k):
            lo, hi = sorted((rank[c], rank[k]))
            between = sum(n_c[order[g]] for g in range(lo, hi + 1))
            return (between - (n_c[c] + n_c[k]) / 2.0) ** 2

        return ordinal
    raise ValueError(f"unknown level {level!r}; use nominal, ordinal, interval or ratio")


# --------------------------------------------------------------------------- summary


def agreement_summary(ratings: Sequence[Sequence[Label | None]]) -> dict[str, float | int]:
    """All statistics of a panel at once (what reports print): items, raters, raw, AC1, kappas, alpha.

    `cohen` is the kappa of the two raters when there are two, else the mean pairwise kappa.
    """
    rows = _rows(ratings)
    raters = max((len(r) for r in ratings), default=0)
    return {
        "items": len(rows),
        "raters": raters,
        "raw": pairwise_raw_agreement(rows),
        "ac1": gwet_ac1_multi(rows),
        "cohen": mean_pairwise_cohen(ratings),
        "fleiss": fleiss_kappa(rows),
        "alpha": krippendorff_alpha(rows),
    }


__all__ = [
    "raw_agreement",
    "gwet_ac1",
    "cohen_kappa",
    "pairwise_raw_agreement",
    "gwet_ac1_multi",
    "fleiss_kappa",
    "mean_pairwise_cohen",
    "krippendorff_alpha",
    "agreement_summary",
]
