"""Shape verdicts: the study's real curves, simulated curves with known answers,
the none rule's permutation test (size and known p-values), and degenerate curves."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import stats
from stats.curve_analysis import analyse_curve
from stats.config import AnalysisConfig, ShapeConfig
from stats.tracked import Curve
from stats.errors import StatsError
from stats.isotonic import isotonic_fit, monotone_r2
from stats.shape import share_interval
from stats.simulate import logistic_probability, logspaced_tokens, simulate_counts_once, step_probability

TOK = logspaced_tokens(1e9, 3e12, 10)
CFG = AnalysisConfig(n_boot=200, progress=False)


def curve(k, n, tokens=TOK, head_class="bos", revisions=None):
    tokens = np.asarray(tokens, float)
    revisions = np.array([f"r{i}" for i in range(len(tokens))]) if revisions is None else np.asarray(revisions)
    return Curve("sim", head_class, revisions, tokens, np.asarray(k, float), np.broadcast_to(np.asarray(n, float), tokens.shape).copy())


def verdicts(make, trials, seed):
    rng = np.random.default_rng(seed)
    return [analyse_curve(curve(*make(rng)), CFG, rng).verdict.shape for _ in range(trials)]


# ---------------------------------------------------------------------------------
# The reference study's real curves (bundled per-head file; the study's thresholds)
# ---------------------------------------------------------------------------------

XU2026 = Path(stats.__file__).parent / "data" / "xu2026_heads.csv.gz"
STUDY_THRESHOLDS = {"bos": 30.0, "induction": 50.0}  # a head counts when S_c >= threshold


def study_curve(model, head_class):
    """Whole-model counts of the study's heads at its thresholds, built here from the
    per-head rows (not through the stats readers)."""
    heads = pd.read_csv(XU2026)
    heads = heads[heads["model"] == model]
    heads = heads.assign(flag=heads[head_class] >= STUDY_THRESHOLDS[head_class])
    t = heads.groupby(["tokens", "revision"])["flag"].agg(["sum", "size"]).reset_index().sort_values("tokens")
    flags = heads.pivot_table(index="tokens", columns=["layer", "head"], values="flag", aggfunc="max").sort_index()
    return Curve(model, head_class, t["revision"].to_numpy(), t["tokens"].to_numpy(float), t["sum"].to_numpy(float),
                 t["size"].to_numpy(float), identity=True,  # the same heads at every revision
                 flags=flags.to_numpy(bool))


@pytest.fixture(scope="module")
def study():
    out = {}
    for model in ("olmo_1b_0724", "pythia_1b"):
        for head_class in ("bos", "induction"):
            out[(model, head_class)] = analyse_curve(study_curve(model, head_class), CFG, np.random.default_rng(0))
    return out


def test_the_study_curves_are_the_published_counts():
    # the counts the study's own summary reports (its README table), so the verdict tests below read the real data
    olmo = study_curve("olmo_1b_0724", "bos")
    assert olmo.k.tolist() == [0, 0, 1, 0, 0, 19, 180, 199, 207, 207] and set(olmo.n) == {256}
    assert study_curve("pythia_1b", "bos").k.tolist() == [0, 0, 0, 0, 0, 0, 14, 38, 59, 74]
    assert study_curve("olmo_1b_0724", "induction").k.tolist() == [0, 0, 1, 3, 2, 3, 3, 3, 2, 3]


def test_olmo_bos_is_sharp_between_the_bracketing_revisions(study):
    ca = study[("olmo_1b_0724", "bos")]
    ev = ca.verdict.evidence
    assert ca.verdict.shape == "sharp"
    assert ev["max_jump_revisions"] == ["step56000-tokens117B", "step126000-tokens264B"]
    assert "step56000-tokens117B -> step126000-tokens264B" in ca.verdict.reason
    assert ev["jump_heads"] == pytest.approx(161) and ev["rise_heads"] == pytest.approx(207)
    # sharp by its 10-90 width: at most 0.5 decades (the heads' own bounds alone allow up to 0.71: 13 % of them
    # switch on after 264B), although it is not a pure step (the step test rejects; evidence, not the criterion)
    assert ev["width_upper"] <= 0.5 and ev["width_grid"][1] == pytest.approx(np.log10(597 / 117), abs=0.01)
    assert ca.step_test.p_value < 0.05 and ev["pure_step"] is False


def test_pythia_bos_is_gradual(study):
    ca = study[("pythia_1b", "bos")]
    assert ca.verdict.shape == "gradual"
    assert ca.verdict.evidence["max_jump_share"] == pytest.approx(24 / 74)  # evidence: the largest interval's share
    assert ca.verdict.evidence["width_lower"] > 0.5


def test_small_induction_circuits_are_transitions(study):
    olmo = study[("olmo_1b_0724", "induction")]
    assert olmo.verdict.shape != "none"
    assert olmo.verdict.evidence["rise_heads"] == pytest.approx(3)
    assert olmo.verdict.evidence["p_change"] <= 0.05
    assert olmo.times is not None and olmo.times.t50 < 117e9  # formed long before the BOS rise
    pythia = study[("pythia_1b", "induction")].verdict
    # its 5 heads appear between step512 and step3000, 0.77 decades apart: more than the criterion
    assert pythia.shape == "unresolved" and "refine between step512 and step3000" in pythia.reason


def test_the_verdict_does_not_flip_with_more_heads():
    """The same shape in 16x as many heads: the verdict is unchanged, while the step test
    (fresh draws) only grows more certain it is not a pure step."""
    c = study_curve("olmo_1b_0724", "bos")
    big = Curve(c.model, c.head_class, c.revisions, c.tokens, c.k * 16, c.n * 16, identity=True)
    ca = analyse_curve(big, CFG, np.random.default_rng(1))
    assert ca.verdict.shape == "sharp"
    assert ca.verdict.evidence["max_jump_share"] == pytest.approx(161 / 207)
    assert ca.step_test.p_value < 0.05


def test_rule_thresholds_come_from_the_config():
    c = study_curve("olmo_1b_0724", "bos")
    strict = AnalysisConfig(n_boot=50, progress=False, shape=ShapeConfig(sharp_width_decades=0.1))
    assert analyse_curve(c, strict, np.random.default_rng(0)).verdict.shape != "sharp"  # 0.36 decades fitted
    loose = AnalysisConfig(n_boot=50, progress=False, shape=ShapeConfig(sharp_width_decades=1.0))
    assert analyse_curve(c, loose, np.random.default_rng(0)).verdict.shape == "sharp"
    ind = study_curve("olmo_1b_0724", "induction")
    four = AnalysisConfig(n_boot=50, progress=False, shape=ShapeConfig(min_rise_heads=4))
    v = analyse_curve(ind, four, np.random.default_rng(0)).verdict
    assert v.shape == "none" and "min_rise_heads 4" in v.reason


@pytest.mark.parametrize("field, value", [("sharp_width_decades", 0.0), ("min_rise_heads", -1.0), ("n_perm", 10),
                                          ("min_points", 1)])
def test_bad_rule_values_are_one_line_stats_errors(field, value):
    cfg = AnalysisConfig(n_boot=20, progress=False, shape=ShapeConfig(**{field: value}))
    with pytest.raises(StatsError, match=rf"^analysis\.shape\.{field}=.*: must be ") as err:
        analyse_curve(curve([0] * 5 + [9] * 5, 64), cfg, np.random.default_rng(0))
    assert "\n" not in str(err.value)


# ---------------------------------------------------------------------------------
# Simulated curves with known answers
# ---------------------------------------------------------------------------------


def test_steps_between_adjacent_revisions_are_sharp():
    """Aggregate steps of 40-100 of 128 heads between two revisions 0.39 decades apart: never
    gradual, and sharp unless the noise cannot exclude a rise of width C = 0.5 decades, a width
    only a little wider than the interval (the boundary test; measured on three seeds of 20 steps:
    49 of 60 sharp with its default 39 null draws, 51 with 99). The steps are drawn from one stream and analysed
    with another, so that the steps do not depend on how many numbers an analysis draws."""
    n = np.full(10, 128)
    data, analysis = np.random.default_rng([0, 0]), np.random.default_rng([0, 1])
    v = []
    for _ in range(20):
        p = step_probability(TOK, data.uniform(0, 0.1), data.uniform(0.4, 0.8), int(data.integers(2, 7)))
        v.append(analyse_curve(curve(simulate_counts_once(p, n, data), n), CFG, analysis).verdict)
    shapes = [x.shape for x in v]
    assert "gradual" not in shapes and shapes.count("sharp") >= 17
    assert all("boundary test" in x.reason for x in v if x.shape == "unresolved")


def test_wide_logistic_ramps_are_gradual():
    n = np.full(10, 128)

    def make(rng):
        p = logistic_probability(TOK, 0.0, rng.uniform(0.4, 0.8), 10 ** rng.uniform(10.3, 11.3), rng.uniform(1.5, 3.0))
        return simulate_counts_once(p, n, rng), n

    v = verdicts(make, 20, 1)
    # 1.5-3 decades wide over a 3.5-decade range, fresh draws: gradual, or unresolved where the ramp's
    # ends leave the range and the fitted width's interval reaches below 0.5 decades; never sharp
    assert v.count("sharp") == 0 and v.count("gradual") >= 14, v


def test_flat_curves_are_none_at_the_tests_size():
    n = np.full(10, 128)

    def make(rng):
        return simulate_counts_once(np.full(10, rng.uniform(0.0, 0.3)), n, rng), n

    v = verdicts(make, 40, 2)
    assert v.count("none") >= 35  # the permutation test's size is 5 %: about 2 of 40 called


def test_overdispersed_step_is_still_sharp_and_ramp_gradual():
    rng, an = np.random.default_rng(3), np.random.default_rng(4)  # the draws apart from the analysis's simulations
    n = np.full(10, 256)
    steps = [analyse_curve(curve(simulate_counts_once(step_probability(TOK, 0.05, 0.6, 4), n, rng, 4.0), n), CFG, an)
             for _ in range(10)]
    sharp = [a.verdict.shape for a in steps]
    # never gradual; sharp where the boundary test excludes a rise of width C at the dispersion estimated from 10
    # points (here 2.6-7.5 for a true 4), unresolved with that reason otherwise
    assert sharp.count("gradual") == 0 and sharp.count("sharp") >= 5, sharp
    assert all("boundary test" in a.verdict.reason for a in steps if a.verdict.reason.startswith("unresolved: read"))
    grad = [analyse_curve(curve(simulate_counts_once(logistic_probability(TOK, 0, 0.6, 1e11, 2.5), n, rng, 4.0), n), CFG, an).verdict.shape
            for _ in range(10)]
    assert grad.count("sharp") == 0 and grad.count("gradual") >= 6  # the rest unresolved: noisy draws, wide interval


def test_evidence_is_reported():
    rng = np.random.default_rng(4)
    n = np.full(10, 128)
    ca = analyse_curve(curve(simulate_counts_once(step_probability(TOK, 0.05, 0.7, 4), n, rng), n), CFG, rng)
    d = ca.to_dict()
    ev = ca.verdict.evidence
    assert d["shape"] == "sharp"
    assert set(d["delta_aicc"]) == {"logistic", "step", "ramp", "constant"}
    assert min(d["delta_aicc"].values()) == 0
    assert d["max_jump_tokens"] == [TOK[4], TOK[5]]
    assert "r4 -> r5" in d["reason"]
    assert d["max_jump_share"] > 0.8
    assert ev["rise_heads"] == pytest.approx(d["rise"] * 128)
    assert ev["jump_heads"] == pytest.approx(d["max_jump"] * 128)
    assert ev["jump_spacing_decades"] == pytest.approx(np.log10(TOK[5] / TOK[4]))
    lo, hi = ev["max_jump_share_ci"]
    assert lo < d["max_jump_share"] <= hi
    assert ev["p_change"] < 0.05 and ev["pure_step"] == (d["p_step"] >= 0.05)
    assert d["width_is_bound"] is True and d["width_decades"] == pytest.approx(np.log10(TOK[5] / TOK[4]))
    assert 0 < d["p_step"] <= 1
    assert d["changepoint_tokens"] == [TOK[4], TOK[5]]


@pytest.mark.parametrize(
    "k, n, tokens, reason, censored",
    [
        ([], [], [], "too short", None),
        ([3], [10], [1e9], "too short", None),
        ([1, 5], [10, 10], [1e9, 1e10], "too short", None),
        ([0] * 10, [64] * 10, TOK, "not formed by the last revision", "right"),
        ([64] * 10, [64] * 10, TOK, "formed at or before it", "left"),  # at its plateau from the start
        ([0, 0, 0, 0, 0, 0, 0, 0, 0, 1], [64] * 10, TOK, "not formed", "right"),  # one head is below min_rise_heads
        ([0, 1, 0, 1, 0, 1, 0, 1, 0, 1], [64] * 10, TOK, "not formed", "right"),
        ([0, 0, 0, 0, 0, 0, 0, 0, 0, 50], [64] * 10, TOK, "last revision alone", "right-1"),  # at one revision only
        ([2, 0, 1, 2, 0, 2, 1, 0, 2, 1], [256] * 10, TOK, "no evidence of change", "right"),  # flicker of two heads
    ],
)
def test_short_flat_or_noise_curves_get_none_with_a_reason(k, n, tokens, reason, censored):
    ca = analyse_curve(curve(k, n, tokens), CFG, np.random.default_rng(0))
    assert ca.verdict.shape == "none"
    assert reason in ca.verdict.reason
    d = ca.to_dict()
    side, bound = (censored or "").partition("-")[0] or None, TOK[-2] if censored == "right-1" else TOK[-1]
    assert d["shape"] == "none" and d["censored"] == side
    if side is None:
        assert d["t50"] is None
    else:  # a bound at the first (left) or the last (right; the one before it for the last alone), open interval
        assert d["t50"] == (TOK[0] if side == "left" else bound)
        assert d["t50_ci"] == ([None, TOK[0]] if side == "left" else [bound, None])


def test_zero_tokens_and_empty_revisions_are_left_out_not_fatal():
    tokens = np.concatenate([[0.0], TOK])
    k = np.concatenate([[0], simulate_counts_once(step_probability(TOK, 0.05, 0.7, 4), np.full(10, 64), np.random.default_rng(5))])
    df = pd.DataFrame({"revision": [f"r{i}" for i in range(11)], "tokens": tokens, "k": k, "n": 64})
    c = Curve.from_frame(df, "sim", "bos")
    assert len(c) == 10 and c.dropped
    ca = analyse_curve(c, CFG, np.random.default_rng(0))
    assert ca.verdict.shape == "sharp"
    assert any("left out" in s for s in ca.notes)


# ---------------------------------------------------------------------------------
# The none rule's permutation test and the share interval
# ---------------------------------------------------------------------------------


def naive_pava(y, w):
    """Pool-adjacent-violators, written out (non-decreasing weighted fit)."""
    blocks = []  # [mean, weight, length]
    for v, wt in zip(y, w):
        blocks.append([v, wt, 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            b, a = blocks.pop(), blocks.pop()
            tot = a[1] + b[1]
            blocks.append([(a[0] * a[1] + b[0] * b[1]) / tot, tot, a[2] + b[2]])
    return np.concatenate([[m] * c for m, _, c in blocks])


def test_isotonic_fit_is_the_pool_adjacent_violators_solution():
    rng = np.random.default_rng(0)
    y = rng.normal(size=(50, 9))
    w = rng.uniform(0.2, 3.0, size=(50, 9))
    fit = isotonic_fit(y, w)
    for i in range(50):
        np.testing.assert_allclose(fit[i], naive_pava(y[i], w[i]), atol=1e-12)


def test_monotone_r2_known_values():
    n = np.full(3, 10.0)
    assert monotone_r2(np.array([0.0, 1.0, 0.0]), n)[0] == pytest.approx(0.25)  # SS0 = 2/3, best monotone SS = 1/2
    assert monotone_r2(np.array([0.0, 1.0, 2.0]), n)[0] == pytest.approx(1.0)
    assert monotone_r2(np.array([5.0, 3.0, 1.0]), n)[0] == pytest.approx(1.0)
    assert monotone_r2(np.array([2.0, 2.0, 2.0]), n)[0] == 0.0


def test_share_interval_known_values():
    lo, hi = share_interval(3, 3, 0.95)
    assert hi == 1.0 and lo == pytest.approx(0.025 ** (1 / 3))
    lo, hi = share_interval(0, 4, 0.95)
    assert lo == 0.0 and hi == pytest.approx(1 - 0.025 ** (1 / 4))
    assert np.isnan(share_interval(0, 0)[0])
