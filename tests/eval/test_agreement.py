"""Agreement statistics against values computed by hand (and two published worked examples)."""

from __future__ import annotations

import math

import pytest

from iba.eval.agreement import (
    agreement_summary,
    cohen_kappa,
    fleiss_kappa,
    gwet_ac1,
    gwet_ac1_multi,
    krippendorff_alpha,
    mean_pairwise_cohen,
    pairwise_raw_agreement,
    raw_agreement,
)

A = [1, 1, 1, 1, 0]
B = [1, 1, 1, 0, 0]


def test_raw_agreement_binary():
    assert raw_agreement(A, B) == pytest.approx(0.8)


def test_gwet_ac1_binary_by_hand():
    # Po = 4/5; pi_1 = (4+3)/10 = .7, pi_0 = .3; Pe = 1/(2-1) * (.7*.3 + .3*.7) = .42
    assert gwet_ac1(A, B) == pytest.approx((0.8 - 0.42) / (1 - 0.42))


def test_cohen_kappa_binary_by_hand():
    # Pe = .8*.6 + .2*.4 = .56
    assert cohen_kappa(A, B) == pytest.approx((0.8 - 0.56) / (1 - 0.56))


def test_gwet_ac1_multi_category_by_hand():
    a = ["x", "x", "y", "z", "z", "x"]
    b = ["x", "y", "y", "z", "x", "x"]
    # Po = 4/6; pi = x .5, y .25, z .25; Pe = (.25 + .1875 + .1875) / 2 = 5/16 -> AC1 = 17/33
    assert gwet_ac1(a, b) == pytest.approx(17 / 33)
    # declaring an unused fourth category changes Q: Pe = .625 / 3
    pe = 0.625 / 3
    assert gwet_ac1(a, b, categories=["x", "y", "z", "w"]) == pytest.approx((4 / 6 - pe) / (1 - pe))


def test_ac1_beats_kappa_paradox_on_skewed_labels():
    # 9 of 10 items both say True, one disagreement: kappa collapses, AC1 stays high
    a = [True] * 9 + [True]
    b = [True] * 9 + [False]
    assert cohen_kappa(a, b) == pytest.approx(0.0)
    # pi_T = 19/20, pi_F = 1/20: Pe = 2 * .95 * .05 = .095; AC1 = (.9 - .095) / .905
    assert gwet_ac1(a, b) == pytest.approx((0.9 - 0.095) / 0.905)


def test_missing_ratings_are_dropped_pairwise():
    a = [1, None, 1, 1, 1, 0]
    b = [1, 0, 1, 1, 0, None]
    # usable items: (1,1),(1,1),(1,1),(1,0) -> Po = .75
    assert raw_agreement(a, b) == pytest.approx(0.75)
    # pi_1 = 7/8, pi_0 = 1/8 -> Pe = 2 * 7/64 = 14/64
    pe = 14 / 64
    assert gwet_ac1(a, b) == pytest.approx((0.75 - pe) / (1 - pe))


def test_degenerate_cases():
    assert math.isnan(raw_agreement([], []))
    assert math.isnan(gwet_ac1([None], [1]))
    assert math.isnan(cohen_kappa([], []))
    assert math.isnan(fleiss_kappa([]))
    assert math.isnan(krippendorff_alpha([[1, None], [None, 2]]))
    same = [True, True, True]
    assert raw_agreement(same, same) == 1.0
    assert gwet_ac1(same, same) == 1.0
    assert gwet_ac1_multi([[1, 1, 1], [1, 1, 1]]) == 1.0
    assert math.isnan(cohen_kappa(same, same))
    assert math.isnan(fleiss_kappa([[1, 1], [1, 1]]))
    assert math.isnan(krippendorff_alpha([[1, 1], [1, 1]]))
    with pytest.raises(ValueError):
        raw_agreement([1, 2], [1])
    with pytest.raises(ValueError):
        gwet_ac1([1], [2], categories=[1])


def test_panel_statistics_reduce_to_two_rater_ones():
    rows = [list(p) for p in zip(A, B)]
    assert pairwise_raw_agreement(rows) == pytest.approx(raw_agreement(A, B))
    assert gwet_ac1_multi(rows) == pytest.approx(gwet_ac1(A, B))
    assert mean_pairwise_cohen(rows) == pytest.approx(cohen_kappa(A, B))


def test_gwet_ac1_three_raters_by_hand():
    rows = [[1, 1, 1], [1, 1, 0], [0, 0, 0], [1, 0, None]]
    # Po per item: 1, 1/3, 1, 0 -> Po = 7/12
    # pi_1 per item: 1, 2/3, 0, 1/2 -> mean 13/24; pi_0 = 11/24
    po = 7 / 12
    pe = 2 * (13 / 24) * (11 / 24)
    assert pairwise_raw_agreement(rows) == pytest.approx(po)
    assert gwet_ac1_multi(rows) == pytest.approx((po - pe) / (1 - pe))


def test_fleiss_kappa_by_hand():
    rows = [[1, 1, 1], [1, 1, 0], [0, 0, 0], [1, 0, 0]]
    # P_i: 1, 1/3, 1, 1/3 -> Po = 2/3; p_1 = 6/12 -> Pe = .5
    assert fleiss_kappa(rows) == pytest.approx((2 / 3 - 0.5) / 0.5)


def test_fleiss_kappa_wikipedia_example():
    # Fleiss (1971) as on Wikipedia: 10 subjects, 14 raters, 5 categories; kappa = 0.210
    counts = [
        [0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
        [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7],
    ]
    rows = [[cat for cat, k in enumerate(row) for _ in range(k)] for row in counts]
    assert fleiss_kappa(rows) == pytest.approx(0.20993, abs=5e-5)


def test_krippendorff_nominal_by_hand():
    rows = [[1, 1], [1, 2], [2, 2], [1, None]]
    # coincidences: (1,1)=2, (1,2)=(2,1)=1, (2,2)=2; n_1 = 3, n_2 = 3, n = 6
    # D_o ~ 2 (sum of off-diagonal), D_e ~ (3*3 + 3*3)/(n-1) = 18/5 -> alpha = 1 - 2*5/18
    assert krippendorff_alpha(rows) == pytest.approx(1 - 10 / 18)


# Krippendorff (2011) "Computing Krippendorff's alpha-reliability": 4 observers, 12 units.
KRIPP = [
    [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3],
    [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None],
]
KRIPP_ROWS = [list(col) for col in zip(*KRIPP)]


@pytest.mark.parametrize(
    "level,expected", [("nominal", 0.743), ("ordinal", 0.815), ("interval", 0.849), ("ratio", 0.797)]
)
def test_krippendorff_published_example(level, expected):
    assert krippendorff_alpha(KRIPP_ROWS, level=level) == pytest.approx(expected, abs=5e-4)


def test_krippendorff_rejects_text_for_interval():
    with pytest.raises(ValueError):
        krippendorff_alpha([["a", "b"]], level="interval")


def test_summary_keys_and_values():
    s = agreement_summary([list(p) for p in zip(A, B)])
    assert s["items"] == 5 and s["raters"] == 2
    assert s["raw"] == pytest.approx(0.8)
    assert s["ac1"] == pytest.approx(gwet_ac1(A, B))
    assert s["cohen"] == pytest.approx(cohen_kappa(A, B))
