"""Hypothesis tests: known answers, and type-I error by simulation (small versions;
the 400-dataset versions are in benchmarks/bench_stats_calibration.py)."""

import numpy as np
import pytest
from scipy import stats as sps

from stats.hypotheses import clopper_pearson_upper, layer_floor_test, permutation_spearman, separation_test, sign_test, step_vs_logistic
from stats.models import fit_all
from stats.simulate import logistic_probability, logspaced_tokens, simulate_counts_once, step_probability

TOK = logspaced_tokens(1e9, 3e12, 10)
N = np.full(10, 128)


def run_step_test(k, rng, n_boot=100, n=N):
    fits, disp = fit_all(TOK, k, n)
    return step_vs_logistic(TOK, k, n, n_boot, rng, disp.phi_raw, fits)


def test_step_test_rejects_gradual_and_keeps_steps():
    rng = np.random.default_rng(0)
    grad = run_step_test(simulate_counts_once(logistic_probability(TOK, 0, 0.6, 5e10, 2.0), N, rng), rng, 200)
    assert grad.p_value < 0.01 and grad.statistic > 10
    step = run_step_test(simulate_counts_once(step_probability(TOK, 0.05, 0.6, 4), N, rng), rng, 200)
    assert step.p_value > 0.05
    assert "single step" in step.null


def test_step_test_type_one_error_small_simulation():
    rng = np.random.default_rng(1)
    trials = 80
    p = [run_step_test(simulate_counts_once(step_probability(TOK, rng.uniform(0, 0.2), rng.uniform(0.4, 0.8),
                                                            int(rng.integers(2, 7))), N, rng), rng).p_value for _ in range(trials)]
    rate = np.mean(np.array(p) <= 0.05)
    assert rate <= 0.14
    # p-values are not degenerate (not all 1): the test can reject
    assert np.std(p) > 0.1


def test_step_test_with_overdispersion_small_simulation():
    rng = np.random.default_rng(2)
    n = np.full(10, 256)
    trials = 60
    p = [run_step_test(simulate_counts_once(step_probability(TOK, 0.05, 0.6, int(rng.integers(2, 7))), n, rng, 4.0), rng, n=n).p_value
         for _ in range(trials)]
    assert np.mean(np.array(p) <= 0.05) <= 0.17


def test_separation_test_known_answers():
    assert separation_test(np.full(999, 1.0)).p_value == pytest.approx(1 / 1000)
    assert separation_test(np.full(999, -1.0)).p_value == pytest.approx(1.0)
    assert 0.4 < separation_test(np.random.default_rng(0).normal(0, 1, 999)).p_value < 0.6


def test_clopper_pearson_known_values_and_coverage():
    assert clopper_pearson_upper(0, 160) == pytest.approx(1 - 0.05 ** (1 / 160))
    assert clopper_pearson_upper(3, 50) == pytest.approx(sps.beta.ppf(0.95, 4, 47))
    rng = np.random.default_rng(3)
    rate, N_ = 0.03, 160
    k = rng.binomial(N_, rate, 2000)
    cover = np.mean([clopper_pearson_upper(int(v), N_) >= rate for v in k])
    assert cover >= 0.95


def test_layer_floor_test_known_and_size():
    t = layer_floor_test(0, 160, 0.05)
    assert t.p_value == pytest.approx(0.95**160)
    assert t.details["upper_bound"] == pytest.approx(1 - 0.05 ** (1 / 160))
    rng = np.random.default_rng(4)
    p = np.array([layer_floor_test(int(v), 160, 0.05).p_value for v in rng.binomial(160, 0.05, 2000)])
    assert np.mean(p <= 0.05) <= 0.05 + 0.015


def test_sign_test_known_values_and_size():
    assert sign_test(10, 0).p_value == pytest.approx(0.5**10)
    assert sign_test(5, 5).p_value == pytest.approx(sps.binom.sf(4, 10, 0.5))
    assert sign_test(0, 0).p_value == 1.0
    rng = np.random.default_rng(5)
    pos = rng.binomial(30, 0.5, 3000)
    assert np.mean([sign_test(int(a), 30 - int(a)).p_value <= 0.05 for a in pos]) <= 0.06


def test_permutation_spearman_known_and_null():
    rng = np.random.default_rng(6)
    x = np.arange(10.0)
    assert permutation_spearman(x, x, 999, rng).p_value == pytest.approx(1 / 1000, abs=2e-3)
    assert permutation_spearman(x, -x, 999, rng).p_value > 0.99
    rej = np.mean([permutation_spearman(x, rng.permutation(x), 199, rng).p_value <= 0.05 for _ in range(300)])
    assert rej <= 0.09
