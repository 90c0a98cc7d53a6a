"""Shape verdicts on simulated curves with known answers, and degenerate curves."""

import numpy as np
import pytest

from stats.analysis import analyse_curve
from stats.config import AnalysisConfig
from stats.curves import Curve
from stats.simulate import logistic_probability, logspaced_tokens, simulate_counts_once, step_probability

TOK = logspaced_tokens(1e9, 3e12, 10)
CFG = AnalysisConfig(n_boot=200, progress=False)


def curve(k, n, tokens=TOK, cls="bos"):
    tokens = np.asarray(tokens, float)
    return Curve("sim", cls, np.array([f"r{i}" for i in range(len(tokens))]), tokens, np.asarray(k, float),
                 np.broadcast_to(np.asarray(n, float), tokens.shape).copy())


def verdicts(make, trials, seed):
    rng = np.random.default_rng(seed)
    return [analyse_curve(curve(*make(rng)), CFG, rng).verdict.shape for _ in range(trials)]


def test_steps_between_adjacent_revisions_are_sharp():
    n = np.full(10, 128)

    def make(rng):
        p = step_probability(TOK, rng.uniform(0, 0.1), rng.uniform(0.4, 0.8), int(rng.integers(2, 7)))
        return simulate_counts_once(p, n, rng), n

    v = verdicts(make, 20, 0)
    assert v.count("sharp") >= 19


def test_wide_logistic_ramps_are_gradual():
    n = np.full(10, 128)

    def make(rng):
        p = logistic_probability(TOK, 0.0, rng.uniform(0.4, 0.8), 10 ** rng.uniform(10.3, 11.3), rng.uniform(1.5, 3.0))
        return simulate_counts_once(p, n, rng), n

    v = verdicts(make, 20, 1)
    assert v.count("gradual") >= 19


def test_flat_curves_are_none():
    n = np.full(10, 128)

    def make(rng):
        return simulate_counts_once(np.full(10, rng.uniform(0.0, 0.3)), n, rng), n

    v = verdicts(make, 20, 2)
    assert v.count("none") >= 19


def test_overdispersed_step_is_still_sharp_and_ramp_gradual():
    rng = np.random.default_rng(3)
    n = np.full(10, 256)
    sharp = [analyse_curve(curve(simulate_counts_once(step_probability(TOK, 0.05, 0.6, 4), n, rng, 4.0), n), CFG, rng).verdict.shape
             for _ in range(10)]
    assert sharp.count("sharp") >= 9
    grad = [analyse_curve(curve(simulate_counts_once(logistic_probability(TOK, 0, 0.6, 1e11, 2.5), n, rng, 4.0), n), CFG, rng).verdict.shape
            for _ in range(10)]
    assert grad.count("gradual") >= 9


def test_evidence_is_reported():
    rng = np.random.default_rng(4)
    n = np.full(10, 128)
    ca = analyse_curve(curve(simulate_counts_once(step_probability(TOK, 0.05, 0.7, 4), n, rng), n), CFG, rng)
    d = ca.to_dict()
    assert d["shape"] == "sharp"
    assert set(d["delta_aicc"]) == {"logistic", "step", "ramp", "constant"}
    assert min(d["delta_aicc"].values()) == 0
    assert d["max_jump_tokens"] == [TOK[4], TOK[5]]
    assert d["max_jump_share"] > 0.8
    assert d["width_is_bound"] is True and d["width_decades"] == pytest.approx(np.log10(TOK[5] / TOK[4]))
    assert 0 < d["p_step"] <= 1
    assert d["changepoint_tokens"] == [TOK[4], TOK[5]]


@pytest.mark.parametrize(
    "k, n, tokens, reason",
    [
        ([], [], [], "too short"),
        ([3], [10], [1e9], "too short"),
        ([1, 5], [10, 10], [1e9, 1e10], "too short"),
        ([0] * 10, [64] * 10, TOK, "flat"),
        ([64] * 10, [64] * 10, TOK, "flat"),
        ([0, 0, 0, 0, 0, 0, 0, 0, 0, 1], [64] * 10, TOK, "flat"),
    ],
)
def test_short_or_flat_curves_get_none_with_a_reason(k, n, tokens, reason):
    ca = analyse_curve(curve(k, n, tokens), CFG, np.random.default_rng(0))
    assert ca.verdict.shape == "none"
    assert reason in ca.verdict.reason
    d = ca.to_dict()
    assert d["t50"] is None and d["shape"] == "none"


def test_zero_tokens_and_empty_revisions_are_left_out_not_fatal():
    tokens = np.concatenate([[0.0], TOK])
    k = np.concatenate([[0], simulate_counts_once(step_probability(TOK, 0.05, 0.7, 4), np.full(10, 64), np.random.default_rng(5))])
    import pandas as pd

    df = pd.DataFrame({"revision": [f"r{i}" for i in range(11)], "tokens": tokens, "k": k, "n": 64})
    c = Curve.from_frame(df, "sim", "bos")
    assert len(c) == 10 and c.dropped
    ca = analyse_curve(c, CFG, np.random.default_rng(0))
    assert ca.verdict.shape == "sharp"
    assert any("left out" in s for s in ca.notes)
