"""Head populations followed across revisions (stats.simulate.HeadPopulation): their
known answers, and the verdict's recovery of sharp vs gradual and of small circuits
on them."""

import numpy as np
import pytest

from stats.curve_analysis import analyse_curve
from stats.config import AnalysisConfig
from stats.sources.csv import read_csv
from stats.tracked import Curve
from stats.errors import StatsError
from stats.simulate import NORMAL_WIDTH_PER_SD, HeadPopulation, logspaced_tokens

TOK = logspaced_tokens(1e9, 3e12, 10)
X = np.log10(TOK)
SPACING = X[1] - X[0]
CFG = AnalysisConfig(n_boot=20, progress=False)  # the verdict does not use the bootstrap


def verdict(pop, rng):
    c = Curve("sim", "bos", np.array([f"r{i}" for i in range(len(pop.tokens))]), pop.tokens, pop.k.astype(float),
              pop.n.astype(float), identity=True, flags=pop.flags)
    return analyse_curve(c, CFG, rng).verdict


def test_explicit_switch_times_give_cumulative_counts_and_their_truth():
    times = [X[2] + 0.1, X[2] + 0.2, X[5] - 0.01, X[0] - 1.0, X[9] + 1.0]
    pop = HeadPopulation(16, 5, 1e11, 0.1, n_always=2).simulate(TOK, np.random.default_rng(0), switch_log10=times)
    # head on from the first revision at or after its switch time, and from then on
    expected = 2 + np.array([(X[r] >= np.array(times)).sum() for r in range(10)])
    assert pop.k.tolist() == expected.tolist()
    assert pop.k.tolist() == [3, 3, 3, 5, 5, 6, 6, 6, 6, 6]
    assert np.all(np.diff(pop.k) >= 0) and set(pop.n) == {16}
    truth = pop.truth()
    assert truth["interval_heads"].tolist() == [0, 0, 2, 0, 1, 0, 0, 0, 0]  # the other two switch outside the revisions
    assert truth["max_interval"] == 2 and truth["max_share"] == pytest.approx(2 / 5)


def test_switch_times_follow_their_distribution():
    rng = np.random.default_rng(1)
    pop = HeadPopulation(5000, 4000, 1e11, 0.4).simulate(TOK, rng)
    s = pop.switch_log10
    assert abs(s.mean() - 11.0) < 4 * 0.4 / np.sqrt(4000)
    assert abs(s.std(ddof=1) - 0.4) < 4 * 0.4 / np.sqrt(2 * 4000)
    assert NORMAL_WIDTH_PER_SD == pytest.approx(2.5631, abs=1e-4)  # 10-90 width of a normal in sds


def test_flicker_and_dropout_rates():
    rng = np.random.default_rng(2)
    pop = HeadPopulation(400, 100, 1e6, 0.01, n_always=50, n_flicker=200, flicker_p=0.3, dropout=0.1).simulate(TOK, rng)
    f = pop.flags
    flick = f[:, 150:350].mean()
    assert abs(flick - 0.3) < 4 * np.sqrt(0.3 * 0.7 / 2000)
    on = f[:, :100]  # all switched on before the first revision: off only by dropout
    assert abs(on.mean() - 0.9) < 4 * np.sqrt(0.09 / 1000)
    assert f[:, 100:150].all() and not f[:, 350:].any()
    assert np.any(np.diff(pop.k) < 0)  # flicker and dropout break the monotonicity


def test_overfull_population_is_a_stats_error():
    with pytest.raises(StatsError, match="exceeds n_heads = 10"):
        HeadPopulation(10, 8, 1e11, 0.1, n_flicker=3)


def test_frame_round_trips_through_the_csv_reader(tmp_path):
    pop = HeadPopulation(64, 20, 1e11, 0.2, n_flicker=2).simulate(TOK, np.random.default_rng(3))
    path = tmp_path / "pop.csv"
    pop.frame("m", "bos").to_csv(path, index=False)
    c = next(read_csv(path).iter_curves())
    assert c.k.tolist() == pop.k.tolist() and c.n.tolist() == [64] * 10


def population_verdicts(width_spacings, trials, seed):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(trials):
        pop = HeadPopulation(256, int(rng.integers(60, 201)), 10 ** rng.uniform(X[2], X[7]),
                             width_spacings * SPACING / NORMAL_WIDTH_PER_SD, n_flicker=4, dropout=0.01).simulate(TOK, rng)
        out.append((verdict(pop, rng).shape, pop.truth()["max_share"]))
    return out


def test_tight_clusters_are_sharp_or_unresolved_never_gradual():
    # switch-on times with a 10-90 width of half a spacing (0.19 decades <= 0.5): sharp wherever the grid
    # resolves it; a cluster that straddles a revision spans two intervals (0.77 decades) and is unresolved
    v = [s for s, _ in population_verdicts(0.5, 40, 4)]
    assert "gradual" not in v and v.count("sharp") >= 10 and v.count("none") == 0


def test_wide_spreads_are_gradual():
    # a 10-90 width of three spacings (1.2 decades)
    v = population_verdicts(3.0, 40, 5)
    assert sum(s == "gradual" for s, _ in v) >= 36


def test_spreads_above_the_criterion_are_never_called_sharp():
    # 10-90 widths of 1.5 and 2 spacings (0.58 and 0.77 decades, above the 0.5 criterion): gradual or
    # unresolved, never sharp (the old share rule called some of them sharp)
    v = [s for s, _ in population_verdicts(1.5, 40, 6) + population_verdicts(2.0, 40, 7)]
    assert "sharp" not in v and "none" not in v and v.count("gradual") >= 25


def test_small_circuit_that_switches_on_and_stays_is_detected():
    rng = np.random.default_rng(8)
    shapes = []
    for _ in range(40):
        pop = HeadPopulation(256, 3, 10 ** rng.uniform(X[1], X[7]), 0.05, n_flicker=2, flicker_p=0.2,
                             dropout=0.05).simulate(TOK, rng)
        shapes.append(verdict(pop, rng).shape)
    assert shapes.count("none") <= 8  # benchmark (bench_shape_oc.py, 200 curves): detected 0.905


def test_flat_populations_are_none():
    rng = np.random.default_rng(9)
    shapes = []
    for _ in range(40):
        pop = HeadPopulation(256, 0, 1e11, 0.1, n_always=int(rng.integers(0, 61)), n_flicker=4).simulate(TOK, rng)
        shapes.append(verdict(pop, rng).shape)
    assert shapes.count("none") >= 35  # the permutation test's size, 5 %
