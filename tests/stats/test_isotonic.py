"""The vectorised pool-adjacent-violators pass (stats/isotonic.py) against the max-min formula."""

import numpy as np
import pytest

from stats.isotonic import explained_share, isotonic_fit, monotone_r2, prefix_isotonic_ss, unimodal_fit, unimodal_ss


@pytest.mark.parametrize("m", [1, 2, 3, 7, 13, 30])
def test_prefix_errors_equal_those_of_the_max_min_fit(m):
    rng = np.random.default_rng(m)
    y = rng.binomial(20, rng.uniform(0, 1, (40, m))) / 20.0
    y[0] = np.sort(y[0])  # already monotone: no pooling
    y[1] = np.sort(y[1])[::-1]  # decreasing: everything pools
    w = rng.integers(0, 300, m).astype(float)  # a zero weight included at times
    pre = prefix_isotonic_ss(y, w)
    for c in range(m):
        fit = isotonic_fit(y[:, : c + 1], w[: c + 1])
        assert pre[:, c] == pytest.approx((w[: c + 1] * (y[:, : c + 1] - fit) ** 2).sum(-1), abs=1e-9)
    if m >= 2:
        ss, ss_up = unimodal_ss(y, w)
        _, ref, ref_up = unimodal_fit(y, w)
        assert ss == pytest.approx(ref, abs=1e-9) and ss_up == pytest.approx(ref_up, abs=1e-9)


def test_a_constant_row_explains_nothing_whatever_the_rounding():
    n = np.array([97.0, 131.0, 255.0, 64.0, 200.0] * 8)
    k = 0.3 * n  # the same fraction everywhere, SS0 rounding noise
    assert monotone_r2(k, n)[0] == 0.0
    assert explained_share(np.vstack([k, np.arange(40.0)]), n, lambda y, w: np.zeros(len(y)))[1] == 1.0
