"""eval.aggregate: the one pass^k the report and a submission's recomputation share."""

from __future__ import annotations

import math

from iba.eval.aggregate import pass_hat_k


def test_pass_hat_k_is_the_unbiased_estimate_over_instances_with_k_trials():
    trials = [[1.0, 1.0, 0.0], [1.0, 1.0, 1.0], [1.0]]  # the last has fewer than k=2 trials: left out
    assert math.isclose(pass_hat_k(trials, 2), (math.comb(2, 2) / math.comb(3, 2) + 1.0) / 2)
    assert math.isclose(pass_hat_k(trials, 1), (2 / 3 + 1.0 + 1.0) / 3)
    assert pass_hat_k([[1.0, 0.5]], 2) == 0.0  # a partial score is not a pass
    assert pass_hat_k([[1.0]], 2) is None


def test_with_k_trials_each_it_is_the_share_whose_trials_all_pass():
    trials = [[1.0, 1.0], [1.0, 0.0], [0.0, 0.0], [1.0, 1.0]]
    assert pass_hat_k(trials, 2) == 0.5
