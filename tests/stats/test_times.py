"""Transition times and gap ratios: known answers and small calibration checks."""

import numpy as np
import pytest

from stats.models import fit_all
from stats.simulate import logistic_probability, logspaced_tokens, simulate_counts_once, step_probability
from stats.times import bootstrap_transition_times, censored_times, gap_ratio, logistic_times

TOK = logspaced_tokens(1e9, 3e12, 10)
N = np.full(10, 128)


def times_of(k, rng, n_boot=300, n=N):
    fits, disp = fit_all(TOK, k, n)
    return bootstrap_transition_times(fits["logistic"], disp, n_boot, rng)[0]


def test_t50_is_recovered_within_its_interval():
    rng = np.random.default_rng(0)
    t = times_of(simulate_counts_once(logistic_probability(TOK, 0.02, 0.6, 5e10, 1.5), N, rng), rng)
    assert t.t50_ci[0] < 5e10 < t.t50_ci[1]
    assert t.t50_ci[1] / t.t50_ci[0] < 10  # informative
    assert t.onset < t.t50 < t.saturation
    assert not t.width_is_bound
    assert t.width_decades == pytest.approx(1.5, rel=0.5)


def test_t50_interval_coverage_small_simulation():
    rng = np.random.default_rng(1)
    hits, trials = 0, 60
    for _ in range(trials):
        t50 = 10 ** rng.uniform(10.2, 11.3)
        k = simulate_counts_once(logistic_probability(TOK, 0.02, rng.uniform(0.3, 0.7), t50, rng.uniform(1.0, 2.5)), N, rng)
        t = times_of(k, rng, 200)
        hits += (t.t50_ci[0] or 0) <= t50 <= (t.t50_ci[1] or np.inf)
    assert 0.85 <= hits / trials <= 1.0


def test_a_sharp_step_is_bracketed_by_its_revisions():
    rng = np.random.default_rng(2)
    t = times_of(simulate_counts_once(step_probability(TOK, 0.05, 0.7, 4), N, rng), rng)
    assert t.width_is_bound
    assert t.bracket_tokens == [pytest.approx(TOK[4]), pytest.approx(TOK[5])]
    assert t.t50_ci[0] <= TOK[4] * 1.0000001 and t.t50_ci[1] >= TOK[5] * 0.9999999
    assert t.width_decades == pytest.approx(np.log10(TOK[5] / TOK[4]))


def test_censoring_flags():
    x = np.log10(TOK)
    early = np.array([[-18, 0.0, x[0] - 0.5, np.log(2.0)]])
    late = np.array([[-18, 0.0, x[-1] + 0.5, np.log(2.0)]])
    assert logistic_times(early, x)["bound"][0] == "upper"
    assert logistic_times(early, x)["t50"][0] == pytest.approx(x[0])
    assert logistic_times(late, x)["bound"][0] == "lower"


def test_gap_of_known_ratio_is_recovered():
    rng = np.random.default_rng(3)
    early = times_of(simulate_counts_once(logistic_probability(TOK, 0.0, 0.2, 5e9, 1.2), N, rng), rng, 500)
    late = times_of(simulate_counts_once(logistic_probability(TOK, 0.0, 0.6, 1e11, 1.2), N, rng), rng, 500)
    g = gap_ratio("m", late, early)
    assert g.ratio_ci[0] < 20 < g.ratio_ci[1]
    assert g.ratio == pytest.approx(20, rel=0.6)
    assert g.p_value < 0.01
    d = g.to_dict()
    assert d["null"] == "t_late / t_early <= 1" and d["bound"] is None


def test_separation_test_small_calibration_at_ratio_one():
    rng = np.random.default_rng(4)
    rej, trials = 0, 60
    for _ in range(trials):
        t50, w = 10 ** rng.uniform(10.3, 11.2), rng.uniform(1.2, 2.0)
        a = times_of(simulate_counts_once(logistic_probability(TOK, 0.0, 0.5, t50, w), N, rng), rng, 150)
        b = times_of(simulate_counts_once(logistic_probability(TOK, 0.0, 0.3, t50, w), N, rng), rng, 150)
        rej += gap_ratio("m", a, b).p_value <= 0.05
    assert rej / trials <= 0.15


def test_already_formed_early_class_gives_a_lower_bound():
    rng = np.random.default_rng(5)
    late = times_of(simulate_counts_once(logistic_probability(TOK, 0.0, 0.6, 1e11, 1.2), N, rng), rng, 300)
    early = censored_times("left", TOK[0], 300)
    assert early.censored == "left" and early.t50_bound == "upper" and early.t50_ci == [None, TOK[0]]
    g = gap_ratio("m", late, early)
    assert g.bound == "lower"
    assert g.ratio == pytest.approx(late.t50 / TOK[0])
    # one-sided: the lower confidence limit of t50(late) over the bound, no upper end
    assert g.ratio_ci[1] is None and g.ratio_ci[0] == pytest.approx(np.quantile(10 ** late.draws_t50, 0.05) / TOK[0], rel=0.02)
    assert g.p_value < 0.01


def test_an_upper_bound_ratio_never_separates():
    """The late class formed at or before the first revision, the early one inside: the ratio is at
    most t_1 / t_early, however far inside the early class lies, so nothing shows it above 1 (a
    bound drawn as a point would: the late bound far above the early t50 read as a large ratio)."""
    rng = np.random.default_rng(8)
    early = times_of(simulate_counts_once(logistic_probability(TOK, 0.0, 0.6, 1e10, 1.2), N, rng), rng, 300)
    for bound in (TOK[0], TOK[-1]):  # a bound below the early t50, and one (a wide bootstrap limit) above it
        late = censored_times("left", bound, 300)
        g = gap_ratio("m", late, early)
        assert g.bound == "upper" and g.ratio_ci[0] is None
        assert g.p_value == 1.0 and any("upper bound" in n for n in g.notes)


def test_t50_coverage_under_overdispersion_small_simulation():
    rng = np.random.default_rng(6)
    n = np.full(10, 256)
    hits, trials = 0, 60
    for _ in range(trials):
        t50 = 10 ** rng.uniform(10.2, 11.3)
        k = simulate_counts_once(logistic_probability(TOK, 0.02, rng.uniform(0.3, 0.7), t50, rng.uniform(1.0, 2.5)), n, rng, 4.0)
        t = times_of(k, rng, 200, n)
        hits += (t.t50_ci[0] or 0) <= t50 <= (t.t50_ci[1] or np.inf)
    assert hits / trials >= 0.85


def test_dispersion_draws():
    from stats.models import Dispersion

    rng = np.random.default_rng(7)
    assert np.all(Dispersion(5.0, 6, 1.0, False, 0.5).draw(100, rng) == 1.0)
    d = Dispersion(24.0, 6, 4.0, True, 0.001).draw(20000, rng)
    assert d.min() >= 1.0 and 3.0 < np.median(d) < 6.0
