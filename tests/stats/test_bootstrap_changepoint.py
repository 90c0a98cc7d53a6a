"""Parametric bootstrap draws and ruptures change points."""

import itertools

import numpy as np
import pytest

from stats.bootstrap import simulate_counts
from stats.changepoint import BinomialCost, detect_changepoints, penalty_value
from stats.simulate import logspaced_tokens, simulate_counts_once, step_probability

TOK = logspaced_tokens(1e9, 3e12, 10)


def test_binomial_and_beta_binomial_moments():
    rng = np.random.default_rng(0)
    p = np.array([0.0, 0.1, 0.5, 0.9, 1.0])
    n = np.full(5, 200)
    k = simulate_counts(p, n, 20000, rng)
    assert np.allclose(k.mean(0), n * p, rtol=0.02, atol=0.2)
    assert np.allclose(k.var(0)[1:4], (n * p * (1 - p))[1:4], rtol=0.08)
    kb = simulate_counts(p, n, 20000, rng, dispersion=5.0)
    assert np.allclose(kb.mean(0), n * p, rtol=0.03, atol=0.3)
    assert np.allclose(kb.var(0)[1:4], 5.0 * (n * p * (1 - p))[1:4], rtol=0.1)
    assert kb[:, 0].max() == 0 and kb[:, -1].min() == 200


def test_changepoint_finds_a_known_step_and_reports_its_bracket():
    rng = np.random.default_rng(1)
    n = np.full(10, 128)
    revs = [f"r{i}" for i in range(10)]
    found = 0
    for _ in range(30):
        k = simulate_counts_once(step_probability(TOK, 0.1, 0.5, 5), n, rng)
        cps = detect_changepoints(TOK, k, n, revs)
        p = cps.primary
        found += p is not None and (p.revision_before, p.revision_after) == ("r5", "r6")
    assert found >= 29
    assert cps.primary_tokens == [TOK[5], TOK[6]]
    assert cps.primary_revisions == ["r5", "r6"]
    assert cps.to_dict()["primary"]["tokens_before"] == TOK[5]


def test_changepoint_false_alarms_under_a_constant_are_rare():
    rng = np.random.default_rng(2)
    n = np.full(10, 128)
    false = sum(bool(detect_changepoints(TOK, simulate_counts_once(np.full(10, 0.3), n, rng), n).points) for _ in range(300))
    assert false / 300 <= 0.02


def test_pelt_is_exact_against_brute_force():
    rng = np.random.default_rng(3)
    n = np.full(8, 60)
    tok = TOK[:8]
    for _ in range(5):
        k = simulate_counts_once(np.array([0.1, 0.1, 0.3, 0.3, 0.3, 0.6, 0.6, 0.2]), n, rng)
        pen = 5.0
        cps = detect_changepoints(tok, k, n, penalty=pen)
        cost = BinomialCost().fit(np.column_stack([k, n]))
        best = np.inf
        for r in range(0, 8):
            for bk in itertools.combinations(range(1, 8), r):
                edges = [0, *bk, 8]
                best = min(best, sum(cost.error(a, b) for a, b in zip(edges[:-1], edges[1:])) + pen * r)
        edges = [0] + [c.index + 1 for c in cps.points] + [8]
        got = sum(cost.error(a, b) for a, b in zip(edges[:-1], edges[1:])) + pen * len(cps.points)
        assert got == pytest.approx(best, abs=1e-8)


def test_penalty_rules():
    n = np.full(10, 128)
    assert penalty_value("bic", n) == pytest.approx(2 * np.log(1280))
    assert penalty_value("bic_revisions", n) == pytest.approx(2 * np.log(10))
    assert penalty_value("7.5", n) == 7.5
    with pytest.raises(ValueError, match="valid choices"):
        penalty_value("aic", n)


def test_short_series_has_no_changepoint():
    cps = detect_changepoints([1e9], [3], [10])
    assert cps.points == [] and cps.primary is None
