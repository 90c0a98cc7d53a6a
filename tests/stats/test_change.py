"""The test of change (stats/change.py): known answers at the edges of the grid, one-revision
outliers, and its size on flat curves."""

import numpy as np
import pytest

from stats.bootstrap import simulate_counts
from stats.change import change_test, describe_single, quasi_lr, single_revision

ALPHA = 0.05


def revs(m):
    return [f"r{i}" for i in range(m)]


def run_test(k, n, flags=None, seed=0, n_perm=999):
    k = np.asarray(k, float)
    n = np.full(len(k), float(n))
    return change_test(k, n, revs(len(k)), flags, n_perm=n_perm, rng=np.random.default_rng(seed))


def population(m, n_heads, switch_at, n_switch):
    """Flags of ``n_switch`` heads that switch on at revision ``switch_at`` and stay on."""
    f = np.zeros((m, n_heads), bool)
    f[switch_at:, :n_switch] = True
    return f


# ---- the cases: an obvious change at the edge of the grid ----

@pytest.mark.parametrize("k, n", [([0, 40, 32, 25, 38, 30, 41, 34, 47, 32], 256),
                                  ([4, 107, 92, 96, 91, 103, 90, 111, 107, 95], 128)])
def test_aggregate_change_after_the_first_revision_is_found(k, n):
    r = run_test(k, n)
    assert r.name == "quasi_likelihood_bootstrap"
    assert r.p_value <= ALPHA and single_revision(r) is None


def test_followed_heads_switching_at_the_second_of_six_revisions_are_found():
    f = np.zeros((6, 192), bool)
    f[1:, :9] = True
    f[2:, 9:12] = True
    r = run_test(f.sum(1), 192, f)
    assert r.name == "headwise_permutation"
    assert r.p_value <= 0.002 and single_revision(r) is None


@pytest.mark.parametrize("m", [5, 6, 10])
@pytest.mark.parametrize("switch_at", ["first", "last_two"])
def test_a_change_at_the_edges_is_found_on_few_revisions(m, switch_at):
    """A change after the first revision, or with two revisions after it, on 5, 6 and 10 revisions:
    both tests find it, and it is not mistaken for a single revision."""
    j = 1 if switch_at == "first" else m - 2
    f = population(m, 96, j, 20)
    for flags in (f, None):
        r = run_test(f.sum(1), 96, flags)
        assert r.p_value <= ALPHA, (flags is None, r)
        assert single_revision(r) is None


@pytest.mark.parametrize("identity", [True, False])
def test_a_change_at_the_last_revision_alone_is_reported_as_that(identity):
    f = population(10, 64, 9, 10)
    r = run_test(f.sum(1), 64, f if identity else None)
    assert r.p_value <= ALPHA  # a change is there...
    assert r.details["single_at"] == "last" and single_revision(r) == "r9"  # ...but on the last revision alone
    assert r.details["p_without"] > ALPHA
    text = describe_single(r, f.sum(1), np.full(10, 64.0), revs(10))
    assert "last revision alone" in text and "later checkpoint" in text


def test_an_outlier_inside_the_range_is_not_a_transition():
    """Ten heads flagged at one inside revision only (identity), and an aggregate spike: either no
    evidence of change, or a change that rests on that revision alone."""
    f = np.zeros((10, 64), bool)
    f[4, :10] = True
    for r in (run_test(f.sum(1), 64, f), run_test([30, 31, 29, 32, 80, 28, 31, 30, 29, 30], 256)):
        assert r.p_value > ALPHA or r.details.get("single_at") == "inside", r


def test_a_level_two_revisions_share_is_not_an_outlier_on_noisy_curves():
    """A change the last two of seven revisions share, three heads beside two flickering ones, and an
    overdispersed aggregate step after the second revision: removing one revision leaves too little
    for the test, but the level is shared, so neither is a one-revision outlier."""
    f = np.zeros((7, 149), bool)
    f[5:, :3] = True  # three heads switch on at r5 and stay
    f[:, 3] = [0, 0, 1, 0, 1, 1, 0]  # two flickering heads
    f[:, 4] = [0, 0, 0, 1, 0, 1, 0]
    f[:, 5:17] = True  # always on
    r = run_test(f.sum(1), 149, f)
    assert r.p_value <= ALPHA and single_revision(r) is None, r
    r = run_test([0, 0, 62, 81, 45, 58, 70], 727)
    assert r.p_value <= ALPHA and single_revision(r) is None, r


def test_the_headwise_statistic_measures_size_not_shape():
    """A small monotone wobble of flickering heads is not a circuit: p > alpha; the same shape made
    of 40 heads switching on and staying is."""
    rng = np.random.default_rng(3)
    f = np.zeros((8, 128), bool)
    f[:, :6] = rng.random((8, 6)) < 0.5
    assert run_test(f.sum(1), 128, f).p_value > ALPHA
    g = population(8, 128, 4, 40)
    assert run_test(g.sum(1), 128, g).p_value <= 0.002


def test_no_change_gives_p_one():
    r = run_test([5, 5, 5, 5, 5], 64)
    assert r.p_value == 1.0 and r.statistic == 0.0


def test_quasi_lr_is_zero_for_a_constant_and_grows_with_the_change():
    n = np.full(6, 200.0)
    t0 = quasi_lr(np.full(6, 20.0), n)[0][0]
    t1 = quasi_lr(np.array([0, 0, 0, 20, 20, 20.0]), n)[0][0]
    t2 = quasi_lr(np.array([0, 0, 0, 80, 80, 80.0]), n)[0][0]
    assert t0 == 0 and 0 < t1 < t2


# ---- size on flat curves (simulation) ----

@pytest.mark.parametrize("m, n, p", [(5, 64, 0.05), (10, 256, 0.2), (20, 1024, 0.01)])
def test_size_on_flat_binomial_curves(m, n, p):
    rng = np.random.default_rng(m)
    rejections = 0
    draws = 150
    for _ in range(draws):
        k = simulate_counts(np.full(m, p), np.full(m, n), 1, rng)[0]
        r = change_test(k, np.full(m, float(n)), revs(m), n_perm=199, rng=rng)
        rejections += r.p_value <= ALPHA and single_revision(r) is None
    assert rejections / draws <= 0.10  # nominal 0.05; 0.10 allows the Monte Carlo error of 150 draws


def test_size_on_flickering_heads():
    """Heads that flicker at their own rates, the rest constant: the head-wise test is exact."""
    rng = np.random.default_rng(7)
    rejections, draws = 0, 150
    for _ in range(draws):
        m = int(rng.integers(5, 20))
        f = np.zeros((m, 128), bool)
        nf = int(rng.integers(1, 30))
        f[:, :nf] = rng.random((m, nf)) < rng.uniform(0.05, 0.95, nf)
        f[:, nf:nf + 8] = True
        r = change_test(f.sum(1), np.full(m, 128.0), revs(m), f, n_perm=199, rng=rng)
        rejections += r.p_value <= ALPHA
    assert rejections / draws <= 0.10
