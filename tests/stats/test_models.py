"""Curve models: known answers, global optimum against brute force, AICc, dispersion."""

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import expit

from stats.models import ConstantModel, LogisticModel, RampModel, StepModel, fit_all, information_criterion
from stats.models.base import binomial_loglik
from stats.models.logistic import logistic_bounds
from stats.simulate import logistic_probability, logspaced_tokens, simulate_counts_once, step_probability

TOK = logspaced_tokens(1e9, 3e12, 10)
X = np.log10(TOK)


def test_logistic_recovers_known_parameters_with_many_heads():
    n = np.full(10, 10**7)
    p = logistic_probability(TOK, 0.05, 0.65, 4e10, 1.5)
    k = np.round(n * p)
    fit = LogisticModel().fit(TOK, k, n)
    pr = fit.params
    assert pr["floor"] == pytest.approx(0.05, abs=1e-3)
    assert pr["ceiling"] == pytest.approx(0.65, abs=1e-3)
    assert 10 ** pr["log10_t50"] == pytest.approx(4e10, rel=0.01)
    assert 2 * np.log(9) / pr["slope"] == pytest.approx(1.5, rel=0.01)
    ci = fit.conf_int()
    assert ci.loc["log10_t50", "lower"] < np.log10(4e10) < ci.loc["log10_t50", "upper"]


def _brute_force_logistic(k, n):
    lo, hi = logistic_bounds(X)

    def nll(th):
        a, b = expit(th[0]), expit(th[1])
        return -binomial_loglik(k, n, a + (b - a) * expit(np.exp(th[3]) * (X - th[2])))

    best = -np.inf
    f = k / n
    for m0 in np.linspace(X[0] - 0.5, X[-1] + 0.5, 7):
        for s0 in np.linspace(lo[3], hi[3], 3):
            for a0, b0 in ((f.min(), f.max()), (f.max(), f.min())):
                a0, b0 = np.clip([a0, b0], 1e-3, 1 - 1e-3)
                r = minimize(nll, [np.log(a0 / (1 - a0)), np.log(b0 / (1 - b0)), m0, s0], method="Powell",
                             bounds=list(zip(lo, hi)))
                best = max(best, -r.fun)
    return best


def test_logistic_fit_reaches_the_global_maximum():
    rng = np.random.default_rng(3)
    n = np.full(10, 128)
    for _ in range(3):
        a, b = rng.uniform(0, 0.3), rng.uniform(0.3, 0.9)
        p = logistic_probability(TOK, a, b, 10 ** rng.uniform(9.5, 11.5), 10 ** rng.uniform(-1.5, 0.5))
        k = simulate_counts_once(p, n, rng)
        fit = LogisticModel().fit(TOK, k, n)
        assert fit.loglik >= _brute_force_logistic(k, n) - 1e-6


def test_step_fit_is_exact_over_every_split():
    rng = np.random.default_rng(4)
    n = np.full(10, 64)
    k = simulate_counts_once(step_probability(TOK, 0.1, 0.6, 3), n, rng)
    fit = StepModel().fit(TOK, k, n)
    best = -np.inf
    for j in range(9):
        a, b = k[: j + 1].sum() / n[: j + 1].sum(), k[j + 1:].sum() / n[j + 1:].sum()
        p = np.where(np.arange(10) <= j, a, b)
        best = max(best, binomial_loglik(k, n, p))
    assert fit.loglik == pytest.approx(best, abs=1e-9)
    assert fit.params["log10_last_before"] == pytest.approx(X[3])
    assert fit.params["log10_first_after"] == pytest.approx(X[4])
    assert fit.n_params == 3


def test_ramp_and_constant_against_direct_optimisation():
    rng = np.random.default_rng(5)
    n = np.full(10, 100)
    k = simulate_counts_once(np.linspace(0.1, 0.5, 10), n, rng)
    ramp = RampModel().fit(TOK, k, n)
    u = (X - X[0]) / (X[-1] - X[0])
    r = minimize(lambda ab: -binomial_loglik(k, n, ab[0] + (ab[1] - ab[0]) * u), [0.2, 0.4], method="L-BFGS-B",
                 bounds=[(1e-6, 1 - 1e-6)] * 2)
    assert ramp.loglik >= -r.fun - 1e-6
    const = ConstantModel().fit(TOK, k, n)
    assert const.params["p"] == pytest.approx(k.sum() / n.sum())


def test_logistic_nests_the_step():
    rng = np.random.default_rng(6)
    n = np.full(10, 128)
    K = np.stack([simulate_counts_once(step_probability(TOK, 0.05, 0.7, j % 8 + 1), n, rng) for j in range(40)])
    ll_log = LogisticModel().fit_batch(X, K, n).loglik
    ll_step = StepModel().fit_batch(X, K, n).loglik
    assert np.all(ll_log >= ll_step - 1e-8)


def test_batch_fit_matches_single_fits():
    rng = np.random.default_rng(8)
    n = np.full(10, 128)
    K = np.stack([simulate_counts_once(logistic_probability(TOK, 0, 0.5, 3e10, 1.0), n, rng) for _ in range(6)])
    batch = LogisticModel().fit_batch(X, K, n).loglik
    single = [LogisticModel().fit(TOK, k, n).loglik for k in K]
    assert np.allclose(batch, single, atol=1e-7)


def test_aicc_and_qaicc_formulas():
    assert information_criterion(-10.0, 4, 10) == pytest.approx(20 + 8 + 40 / 5)
    assert information_criterion(-10.0, 4, 10, dispersion=2.0) == pytest.approx(10 + 10 + 60 / 4)
    assert information_criterion(-10.0, 4, 5) == float("inf")


def test_dispersion_estimate_binomial_and_overdispersed():
    rng = np.random.default_rng(9)
    n = np.full(10, 256)
    p = logistic_probability(TOK, 0.05, 0.6, 5e10, 1.5)
    present_binomial, phis = 0, []
    for _ in range(60):
        k = simulate_counts_once(p, n, rng)
        fits, disp = fit_all(TOK, k, n)
        present_binomial += disp.present
        kb = simulate_counts_once(p, n, rng, dispersion=6.0)
        phis.append(fit_all(TOK, kb, n)[1].phi)
    assert present_binomial / 60 <= 0.15  # nominal 5 %
    assert 3.0 < np.median(phis) < 12.0
    # where present it is applied: QAICc and wider intervals
    fits, disp = fit_all(TOK, kb, n)
    if disp.present:
        assert fits["logistic"].dispersion == disp.phi


def test_fit_results_api():
    rng = np.random.default_rng(10)
    n = np.full(10, 128)
    k = simulate_counts_once(logistic_probability(TOK, 0.02, 0.5, 3e10, 1.2), n, rng)
    fits, _ = fit_all(TOK, k, n)
    for name, fit in fits.items():
        assert fit.model.name == name
        assert np.isfinite(fit.aicc) and np.isfinite(fit.loglik)
        assert fit.predict(TOK).shape == (10,)
        assert np.all((fit.predict(TOK) >= 0) & (fit.predict(TOK) <= 1))
        ci = fit.conf_int()
        assert list(ci.columns) == ["lower", "upper"]
        text = fit.summary()
        assert name in text and "AICc" in text
        for p in fit.params.index:
            assert p in text
    boot_ci = fits["logistic"].conf_int(method="bootstrap", n_boot=200)
    assert boot_ci.loc["log10_t50", "lower"] < fits["logistic"].params["log10_t50"] < boot_ci.loc["log10_t50", "upper"]
    with pytest.raises(ValueError, match="valid choices"):
        fits["logistic"].conf_int(method="profile")


def test_wald_interval_of_the_constant_covers_at_nominal_rate():
    rng = np.random.default_rng(11)
    n = np.full(10, 50)
    hits = 0
    for _ in range(300):
        k = simulate_counts_once(np.full(10, 0.3), n, rng)
        ci = ConstantModel().fit(TOK, k, n).conf_int()
        hits += ci.loc["p", "lower"] <= 0.3 <= ci.loc["p", "upper"]
    assert 0.90 <= hits / 300 <= 0.99
