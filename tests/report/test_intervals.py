import numpy as np
import pytest

from iba.report.intervals import bootstrap_ci, paired, sign_test

scipy_stats = pytest.importorskip("scipy.stats")


def test_constant_vector_has_zero_width():
    ci = bootstrap_ci([0.5] * 20)
    assert (ci.mean, ci.lo, ci.hi, ci.n) == (0.5, 0.5, 0.5, 20)
    p = paired([1.0] * 10, [1.0] * 10)
    assert (p.diff.lo, p.diff.hi, p.p_sign, p.p_boot, p.ties) == (0.0, 0.0, 1.0, 1.0, 10)


def test_bootstrap_matches_scipy_percentile():
    x = np.random.default_rng(3).uniform(size=60)
    ours = bootstrap_ci(x, n_boot=20000, seed=1)
    ref = scipy_stats.bootstrap((x,), np.mean, n_resamples=20000, method="percentile",
                                random_state=np.random.default_rng(2)).confidence_interval
    assert ours.mean == pytest.approx(x.mean())
    # two independent Monte Carlo estimates of the same quantiles
    assert ours.lo == pytest.approx(ref.low, abs=0.01) and ours.hi == pytest.approx(ref.high, abs=0.01)
    assert ours.lo < x.mean() < ours.hi


def test_sign_test_matches_scipy_binomtest():
    for wins, losses in [(0, 0), (7, 3), (15, 2), (1, 9), (10, 10), (0, 12)]:
        want = 1.0 if wins + losses == 0 else scipy_stats.binomtest(wins, wins + losses, 0.5).pvalue
        assert sign_test(wins, losses) == pytest.approx(want, rel=1e-9)


def test_paired_difference_is_paired():
    # b is a with a constant 0.1 taken off: the paired interval has zero width at 0.1, while the
    # unpaired spread of either agent is far wider
    a = list(np.random.default_rng(0).uniform(0.2, 1.0, size=40))
    b = [v - 0.1 for v in a]
    p = paired(a, b)
    assert p.diff.mean == pytest.approx(0.1) and p.diff.lo == pytest.approx(0.1) and p.diff.hi == pytest.approx(0.1)
    assert (p.wins, p.losses) == (40, 0) and p.p_sign < 1e-10 and p.p_boot == 0.0
    with pytest.raises(ValueError, match="same instances"):
        paired([1.0], [1.0, 0.0])


def test_pass_hat_k_needs_every_trial_to_pass():
    from types import SimpleNamespace

    from iba.report.tables import _pass_hat_k

    def inst(row, scores):
        trials = list(range(len(scores)))
        return SimpleNamespace(row=row, trials=trials, trial_score=lambda r, j, s=scores: s[r])

    data = SimpleNamespace(judges=None, compared=[inst("a", [1.0, 1.0]), inst("a", [1.0, 0.5]),
                                                   inst("a", [1.0, 1.0]), inst("b", [0.0, 1.0])])
    assert _pass_hat_k(data, "a", 2) == pytest.approx(100 * 2 / 3, abs=0.05)
    assert _pass_hat_k(data, "b", 2) == 0.0
    assert _pass_hat_k(data, "a", 3) is None  # no instance has 3 trials
