"""stats/head_times.py: followed heads' t50 intervals from their own switch-on times."""

import numpy as np
import pytest

from stats.censoring import censoring_from_fit
from stats.config import AnalysisConfig
from stats.curve_analysis import analyse_curve
from stats.head_times import head_draws, switch_intervals, with_head_times
from stats.simulate import HeadPopulation, logspaced_tokens
from stats.times import TransitionTimes
from stats.tracked import Curve

TOK = logspaced_tokens(1e9, 1e12, 10)
X = np.log10(TOK)


def flags_switching_at(*revisions, m=10, extra_off=0):
    f = np.zeros((m, len(revisions) + extra_off), bool)
    for h, j in enumerate(revisions):
        f[j:, h] = True
    return f


def test_heads_switching_in_one_interval_give_that_interval_whatever_their_number():
    for n in (3, 40):
        iv = switch_intervals(flags_switching_at(*[4] * n), TOK)
        assert iv.shape == (n, 2) and np.allclose(iv, [X[3], X[4]])
        draws, lo, hi = head_draws(iv, 500, np.random.default_rng(0))["t50"]
        assert np.allclose(lo, X[3]) and np.allclose(hi, X[4])
        assert X[3] <= draws.min() and draws.max() <= X[4] and np.ptp(draws) > 0.8 * (X[4] - X[3])


def test_the_median_head_decides_and_resampling_moves_it_between_intervals():
    iv = switch_intervals(flags_switching_at(2, 2, 2, 2, 2, 7, 7, 7, 7, 7, 7), TOK)
    draws, lo, hi = head_draws(iv, 2000, np.random.default_rng(1))["t50"]
    assert set(np.round(lo, 6)) == {round(X[1], 6), round(X[6], 6)}  # 5 early, 6 late heads: either may hold the median
    assert np.mean(lo == X[6]) > 0.5


def test_an_even_number_of_heads_puts_the_median_midway_between_the_middle_two():
    """Two heads, one switching at revision 2 and one at 8: t50 lies between them (the lower head
    alone, rank ceil(n/2) - 1, put OLMo's induction t50 at its first head's time)."""
    iv = switch_intervals(flags_switching_at(2, 8), TOK)
    draws, lo, hi = head_draws(iv, 4000, np.random.default_rng(2))["t50"]
    both = ~np.isclose(lo, X[1]) & ~np.isclose(lo, X[7])  # replicates holding both heads
    assert np.allclose(lo[both], (X[1] + X[7]) / 2) and np.allclose(hi[both], (X[2] + X[8]) / 2)
    assert 0.4 < both.mean() < 0.6
    assert abs(np.mean(np.isclose(lo, X[1])) - np.mean(np.isclose(lo, X[7]))) < 0.05  # no side favoured
    assert abs(np.median(draws) - (X[1] + X[8]) / 2) < 0.5 * (X[1] - X[0])


def test_too_few_heads_leave_the_times_alone():
    assert switch_intervals(flags_switching_at(3, extra_off=5), TOK) is None
    t = TransitionTimes(1e10, 1e10, 1e10, [1e9, 1e11], [9e9, 2e10], [1e9, 1e11], 0.2, False, 0.3,
                        draws_t50=np.full(10, 10.0), draws_onset=np.full(10, 10.0))
    assert with_head_times(t, flags_switching_at(3, extra_off=5), TOK, 10, np.random.default_rng(0)) is t


def test_times_and_draws_are_the_heads_and_intervals_the_union_with_the_logistic():
    t = TransitionTimes(1e10, 1e10, 1e10, [1e9, 1e11], [9.5e9, 1.1e10], [1e9, 1e11], 0.2, False, 0.3,
                        draws_t50=np.full(200, 10.0), draws_onset=np.full(200, 10.0))
    out = with_head_times(t, flags_switching_at(*[6] * 8), TOK, 200, np.random.default_rng(0))
    lo, hi = out.t50_ci
    assert lo == pytest.approx(9.5e9) and hi == pytest.approx(TOK[6])  # the logistic's start, the heads' end
    assert np.all((X[5] <= out.draws_t50) & (out.draws_t50 <= X[6]))  # every draw the heads' own
    assert TOK[5] < out.t50 < TOK[6] and TOK[5] < out.onset < TOK[6]  # the point inside their interval, not 1e10
    assert "switch-on times" in out.notes[-1]


def test_followed_heads_t50_intervals_cover_their_median_switch_on():
    """Populations of followed heads that switch on at their own times and stay on, on random log grids:
    the t50 interval holds the heads' own median switch-on time in at least 90 % of them."""
    rng = np.random.default_rng(7)
    cfg = AnalysisConfig(n_boot=200, progress=False)
    hits = total = 0
    for _ in range(40):
        tokens = logspaced_tokens(10 ** rng.uniform(8, 10), 10 ** rng.uniform(11, 13), int(rng.integers(6, 21)))
        x = np.log10(tokens)
        x50 = rng.uniform(x[1], x[-2])
        pop = HeadPopulation(256, int(rng.integers(8, 80)), 10**x50, rng.uniform(0.02, 0.6), n_always=4, n_flicker=3,
                             flicker_p=0.3)
        sim = pop.simulate(tokens, rng)
        c = Curve("sim", "bos", np.array([f"r{i}" for i in range(len(tokens))]), tokens, sim.flags.sum(1).astype(float),
                  np.full(len(tokens), 256.0), identity=True, flags=sim.flags)
        ca = analyse_curve(c, cfg, rng)
        if ca.times is None or ca.censored:
            continue
        lo, hi = ca.times.t50_ci
        truth = 10 ** np.median(sim.switch_log10)
        hits += (lo or 0) <= truth <= (hi or np.inf)
        total += 1
    assert total >= 30 and hits / total >= 0.9, (hits, total)


def test_a_midpoint_fitted_outside_is_bounded_by_its_bootstrap_where_that_reaches_inside():
    c = Curve("sim", "bos", np.array([f"r{i}" for i in range(10)]), TOK, np.zeros(10), np.full(10, 64.0))
    plain = censoring_from_fit(c, X[0] - 0.2)
    assert plain.side == "left" and plain.bound(TOK) == TOK[0]
    reaching = censoring_from_fit(c, X[0] - 0.2, np.linspace(X[0] - 0.5, X[1], 101))
    assert reaching.side == "left" and TOK[0] < reaching.bound(TOK) <= TOK[1] and "upper 95% limit" in reaching.reason
    late = censoring_from_fit(c, X[-1] + 0.2, np.linspace(X[-2], X[-1] + 0.5, 101))
    assert late.side == "right" and TOK[-2] <= late.bound(TOK) < TOK[-1]


def test_a_rise_still_under_way_counts_its_heads_to_come_after_the_range():
    """8 heads switched on at the 7th revision of a rise the logistic sizes at ``n_rise`` heads: with 30
    the median head is one still to come (after the range), so the logistic's t50 stands; with 12 it is
    seen in most replicates, the t50 is the heads' and its interval holds the point."""
    t = TransitionTimes(1e11, 2e11, 5e11, [1e10, None], [1e11, 5e11], [1e11, None], 0.8, False, 0.3,
                        draws_t50=np.full(300, np.log10(2e11)), draws_onset=np.full(300, 11.0))
    flags = flags_switching_at(*[6] * 8)
    rng = np.random.default_rng(2)
    late = with_head_times(t, flags, TOK, 300, rng, n_rise=30)
    assert late.t50 == 2e11 and late.t50_ci == [1e11, 5e11]
    seen = with_head_times(t, flags, TOK, 300, rng, n_rise=12)
    assert TOK[5] < seen.t50 <= TOK[6] and seen.t50_ci[0] <= seen.t50 <= (seen.t50_ci[1] or np.inf)
    assert "t50" in seen.notes[-1] and "saturation" not in seen.notes[-1]  # the 90 % head is still to come


def test_heads_still_arriving_bound_the_logistics_time_from_below():
    """Two heads settled at the 9th of 10 revisions, a rise the logistic sizes at 8 heads (six still to
    come): the median head is one to come, so the logistic's t50 stands, but its early midpoint (a jump at
    the end fits one long before it) cannot precede the heads switched so far: draws, point and interval
    are floored at their own lower limit, the 8th revision (the old reading kept the logistic's 1e9)."""
    t = TransitionTimes(1e10, 1e10, 5e11, [1e9, None], [1e9, None], [1e10, None], 0.8, False, 0.3,
                        draws_t50=np.linspace(9.0, 12.0, 300), draws_onset=np.full(300, 9.5))
    out = with_head_times(t, flags_switching_at(8, 8, extra_off=3), TOK, 300, np.random.default_rng(3), n_rise=8)
    assert out.t50_ci[0] == pytest.approx(TOK[7]) and out.t50 >= TOK[7] and out.t50_ci[1] is None
    assert out.draws_t50.min() == pytest.approx(X[7]) and out.draws_t50.max() == pytest.approx(12.0)
    assert "t50 from the logistic" in out.notes[-1] and "no earlier than" in out.notes[-1]
    assert TOK[7] < out.onset <= TOK[8]  # the 10 % head is one of the two seen: the heads' own
