"""The vectorised pool-adjacent-violators pass (stats/isotonic.py) against the max-min formula."""

import numpy as np
import pytest

from stats import isotonic
from stats.isotonic import (explained_share, isotonic_fit, monotone_r2, pava_fit, prefix_isotonic_ss, unimodal_fit,
                            unimodal_ss)


@pytest.mark.parametrize("m", [1, 2, 3, 7, 13, 30])
def test_prefix_errors_equal_those_of_the_max_min_fit(m, monkeypatch):
    monkeypatch.setattr(isotonic, "PAVA_FROM", 10**9)  # isotonic_fit by the max-min formula at every length
    rng = np.random.default_rng(m)
    y = rng.binomial(20, rng.uniform(0, 1, (40, m))) / 20.0
    y[0] = np.sort(y[0])  # already monotone: no pooling
    y[1] = np.sort(y[1])[::-1]  # decreasing: everything pools
    w = rng.integers(1, 300, m).astype(float)
    pre = prefix_isotonic_ss(y, w)
    for c in range(m):
        fit = isotonic_fit(y[:, : c + 1], w[: c + 1])
        assert pre[:, c] == pytest.approx((w[: c + 1] * (y[:, : c + 1] - fit) ** 2).sum(-1), abs=1e-9)
    assert pava_fit(y, w) == pytest.approx(isotonic_fit(y, w), abs=1e-12)
    for row in range(3):  # one row at a time (the plain loop) gives the same
        assert prefix_isotonic_ss(y[row], w)[0] == pytest.approx(pre[row], abs=1e-9)
        assert pava_fit(y[row], w)[0] == pytest.approx(pava_fit(y, w)[row], abs=1e-12)
        assert unimodal_fit(y[row], w)[0][0] == pytest.approx(unimodal_fit(y, w)[0][row], abs=1e-12)
    monkeypatch.setattr(isotonic, "PAVA_FROM", 0)
    assert isotonic_fit(y, w) == pytest.approx(pava_fit(y, w), abs=0)  # long rows delegate to the same pass
    monkeypatch.setattr(isotonic, "PAVA_FROM", 10**9)
    fit, ss, ss_up = unimodal_fit(y, w)
    ref_fit, ref_ss = _unimodal_by_every_split(y, w)
    assert fit == pytest.approx(ref_fit, abs=1e-12) and ss == pytest.approx(ref_ss, abs=1e-9)
    assert ss_up == pytest.approx(pre[:, -1], abs=1e-9)
    assert unimodal_ss(y, w)[0] == pytest.approx(ref_ss, abs=1e-9)


def _unimodal_by_every_split(y, w):
    """The unimodal fit by the max-min formula at every split, the first best split kept."""
    best = isotonic_fit(y, w)
    best_ss = (w * (y - best) ** 2).sum(-1)
    for c in range(1, y.shape[-1]):
        fit = np.concatenate([isotonic_fit(y[:, :c], w[:c]), -isotonic_fit(-y[:, c:], w[c:])], -1)
        ss = (w * (y - fit) ** 2).sum(-1)
        better = ss < best_ss - 1e-12
        best, best_ss = np.where(better[:, None], fit, best), np.where(better, ss, best_ss)
    return best, best_ss


def test_a_constant_row_explains_nothing_whatever_the_rounding():
    n = np.array([97.0, 131.0, 255.0, 64.0, 200.0] * 8)
    k = 0.3 * n  # the same fraction everywhere, SS0 rounding noise
    assert monotone_r2(k, n)[0] == 0.0
    assert explained_share(np.vstack([k, np.arange(40.0)]), n, lambda y, w: np.zeros(len(y)))[1] == 1.0
