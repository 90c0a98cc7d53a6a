"""The space of simulated studies (stats/study_space.py): its draws span the space real studies
span, and their truths are right on constructed cases."""

import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest

from stats.space_scores import REVISION_BINS, SWITCH_BINS, factor_bins, factor_table, pair_bins, score_study
from stats.study_space import (DETECTABLE_Z, GRIDS, PYTHIA_STEPS, PYTHIA_TOKENS_PER_STEP, StudySpace, _truth, oracle_z,
                               position_of, sample_grid, sample_pair, sample_study)


@pytest.fixture(scope="module")
def draws():
    rng = np.random.default_rng(33)
    return [sample_study(rng) for _ in range(500)]


def test_500_draws_span_every_factor(draws):
    f = [d.factors for d in draws]
    assert {x["grid"] for x in f} == set(GRIDS)
    assert {x["regime"] for x in f} == {"identity", "aggregate"}
    assert {d.truth.position for d in draws} == {"before", "first", "inside", "last", "after", "flat"}
    assert {x["step0"] for x in f} == {True, False}
    assert any(x["decline"] for x in f)
    revisions = [x["revisions"] for x in f]
    assert min(revisions) == 5 and max(revisions) > 100 and all(5 <= r <= 150 for r in revisions)
    assert np.mean(np.array(revisions) <= 20) > 0.4  # more mass on small grids
    switching = [x["n_switch"] for x in f if not x["flat"]]
    assert min(switching) == 3 and max(switching) > 250 and max(switching) <= 400
    assert all(64 <= x["n_heads"] <= 1024 for x in f)
    assert all(x["n_switch"] <= 0.6 * x["n_heads"] or x["n_switch"] == 3 for x in f)
    widths = [x["width_drawn"] for x in f]
    assert min(widths) < 0.03 and max(widths) > 2.5 and all(0.02 <= w <= 3.0 for w in widths)
    bins = [factor_bins(d) for d in draws]
    assert {b["revisions"] for b in bins} == {f"{lo}-{hi}" for lo, hi in REVISION_BINS}
    assert {b["switching heads"] for b in bins} == {f"{lo}-{hi}" for lo, hi in SWITCH_BINS} | {"flat"}
    assert {b["true width"] for b in bins} == {"sharp", "borderline", "gradual", "flat"}


def test_the_first_and_last_intervals_occur_on_every_grid_kind(draws):
    for kind in GRIDS:
        positions = {d.truth.position for d in draws if d.factors["grid"] == kind}
        assert {"before", "first", "last", "after"} <= positions, (kind, positions)


def test_the_simulated_counts_follow_the_grid_and_the_regime(draws):
    for d in draws:
        sim, curve = d.sim, d.curve()
        assert len(sim.tokens) == d.factors["revisions"] + d.factors["step0"]
        assert len(curve) == d.factors["revisions"] and np.all(curve.tokens > 0)
        assert bool(curve.dropped) == d.factors["step0"]
        assert np.all((sim.k >= 0) & (sim.k <= sim.n)) and np.all(sim.n == d.factors["n_heads"])
        assert sim.identity == (d.factors["regime"] == "identity")
        assert (sim.flags is not None) == sim.identity


def test_grids_log_linear_and_pythia():
    rng = np.random.default_rng(0)
    log = sample_grid("log", 12, rng, p_step0=0.0)
    assert len(log) == 12 and np.allclose(np.diff(np.log10(log)), np.diff(np.log10(log))[0])
    lin = sample_grid("linear", 9, rng, p_step0=1.0)
    assert lin[0] == 0 and len(lin) == 10 and np.allclose(np.diff(lin[1:]), np.diff(lin[1:])[0])
    for m in (5, 40, 150):
        py = sample_grid("pythia", m, rng, p_step0=0.0)
        steps = py / PYTHIA_TOKENS_PER_STEP
        assert len(py) == m and np.all(np.diff(py) > 0) and np.isin(steps, PYTHIA_STEPS[1:]).all()
    with pytest.raises(ValueError, match="valid"):
        sample_grid("cosine", 5, rng)


def test_positions_on_a_known_grid():
    x = np.array([9.0, 9.5, 10.0, 10.5, 11.0])
    assert [position_of(v, x) for v in (8.2, 9.0, 9.2, 9.5, 10.2, 10.7, 11.0, 11.3)] == \
        ["before", "before", "first", "first", "inside", "last", "last", "after"]


def test_truths_on_constructed_cases():
    x = np.array([9.0, 9.5, 10.0, 10.5, 11.0, 12.0])  # the last interval is 1 decade wide
    sharp = _truth(x, 9.8, 9.75, 9.85, False, 0.5)
    assert (sharp.shape, sharp.censored, sharp.position, sharp.resolvable) == ("sharp", None, "inside", True)
    assert sharp.accepted() == ("sharp",) and sharp.t50 == pytest.approx(10**9.8)
    gradual = _truth(x, 10.1, 9.2, 10.9, False, 0.5)
    assert gradual.width_decades == pytest.approx(1.7) and gradual.accepted() == ("gradual",)
    # a sharp rise whose 90 % point only the last revision follows: heads may still arrive there, and
    # a revision after it shows they stopped
    short = np.array([9.0, 9.5, 10.0, 10.2, 10.45])
    assert not _truth(short, 10.2, 10.05, 10.35, False, 0.5).grid_resolvable
    assert _truth(np.append(short, 10.7), 10.2, 10.05, 10.35, False, 0.5).accepted() == ("sharp",)
    border = _truth(x, 10.2, 9.9, 10.5, False, 0.5)  # 0.6 decades: within [C / 1.5, 1.5 C]
    assert border.borderline and set(border.accepted()) == {"sharp", "gradual", "unresolved"}
    # a 0.3-decade rise (sharp by C = 0.5) inside the last interval, 1 decade wide: not resolvable
    hidden = _truth(x, 11.5, 11.35, 11.65, False, 0.5)
    assert hidden.position == "last" and not hidden.grid_resolvable and not hidden.borderline
    assert "unresolved" in hidden.accepted()
    # the same rise inside a 0.5-decade interval (not wider than C) is resolvable: sharp
    assert _truth(x, 10.25, 10.1, 10.4, False, 0.5).accepted() == ("sharp",)
    # a sharp rise straddling a revision between two 1-decade intervals: its width is bounded by 2 decades only
    assert not _truth(np.array([9.0, 10.0, 11.0]), 10.0, 9.9, 10.1, False, 0.5).grid_resolvable
    # a gradual rise (0.8 decades) with no revision inside it; one (1.3 decades) whose two revisions inside are 0.5
    # apart, which bound its width from below by 0.5 only; then one with revisions inside 1 decade apart
    assert not _truth(x, 11.5, 11.1, 11.9, False, 0.5).grid_resolvable
    assert not _truth(x, 10.25, 9.6, 10.9, False, 0.5).grid_resolvable
    assert _truth(x, 10.0, 9.4, 10.7, False, 0.5).accepted() == ("gradual",)
    # a gradual rise whose 90 % point lies after the last revision (revisions inside it 2.5 decades apart): the
    # data do not show its ceiling, so nothing tells that the last revision lies inside it; not resolvable, and
    # the wrong shape is still wrong (unresolved or gradual accepted, never sharp)
    open_end = _truth(x, 11.0, 9.2, 12.8, False, 0.5)
    assert not open_end.grid_resolvable and open_end.accepted() == ("gradual", "unresolved")
    assert not _truth(x, 10.0, 8.8, 11.2, False, 0.5).grid_resolvable  # its 10 % point before the first
    left = _truth(x, 8.5, 8.0, 9.0, False, 0.5)
    right = _truth(x, 12.4, 12.3, 12.5, False, 0.5)
    assert (left.censored, left.position, left.accepted()) == ("left", "before", ("none",))
    assert (right.censored, right.position, right.accepted()) == ("right", "after", ("none",))
    # a censored rise partly inside the range (its start seen before the last revision, or its end after
    # the first) is one the grid cannot resolve: its true shape or unresolved is right besides none, the
    # other shape never
    started = _truth(x, x[-1] + 0.3, x[-1] - 0.5, x[-1] + 1.1, False, 0.5)
    assert started.censored == "right" and started.partly_seen and not started.grid_resolvable
    assert set(started.accepted()) == {"none", "gradual", "unresolved"}
    ended = _truth(x, x[0] - 0.05, x[0] - 0.1, x[0] + 0.05, False, 0.5)
    assert ended.censored == "left" and ended.partly_seen and set(ended.accepted()) == {"none", "sharp", "unresolved"}
    assert not left.partly_seen and not right.partly_seen


def test_identity_truth_is_the_heads_own_switch_on_times(draws):
    for d in (d for d in draws if d.factors["regime"] == "identity" and not d.truth.flat):
        s = d.switch_log10
        assert len(s) == d.factors["n_switch"]
        assert np.log10(d.truth.t50) == pytest.approx(np.median(s))
        assert d.truth.width_decades == pytest.approx(np.subtract(*np.quantile(s, [0.9, 0.1])))
        with np.errstate(divide="ignore"):
            x = np.log10(d.sim.tokens)
        on = d.sim.flags[:, : len(s)]
        assert not (on & (x[:, None] < s[None, :])).any()  # never on before its switch-on time
        if d.factors["regime"] == "identity" and not d.factors["decline"]:
            assert d.sim.k[-1] >= 0


def test_aggregate_truth_is_the_logistic(draws):
    agg = [d for d in draws if d.factors["regime"] == "aggregate" and not d.truth.flat]
    assert agg
    for d in agg:
        assert d.truth.width_decades == pytest.approx(d.factors["width_drawn"])
        assert d.truth.x90 - d.truth.x10 == pytest.approx(d.factors["width_drawn"])


def test_flat_studies_have_no_rise(draws):
    flat = [d for d in draws if d.factors["flat"]]
    assert flat and all(d.truth.shape == "none" and d.truth.accepted() == ("none",) for d in flat)
    assert all(d.sim.flags[:, : d.factors["n_switch"]].size == 0 for d in flat if d.sim.identity)


@pytest.mark.parametrize("ratio", [1.0, 5.0])
def test_pairs_are_the_ratio_apart_inside_the_range(ratio):
    rng = np.random.default_rng(5)
    for _ in range(60):
        early, late = sample_pair(rng, ratio)
        assert late.truth.t50 / early.truth.t50 == pytest.approx(ratio)
        assert early.factors["grid"] == late.factors["grid"] and early.factors["regime"] == late.factors["regime"]
        assert np.array_equal(early.sim.tokens, late.sim.tokens)
        assert early.truth.censored is None and late.truth.censored is None
        if early.sim.identity:
            assert np.median(early.switch_log10) == pytest.approx(np.log10(early.truth.t50))
            assert np.median(late.switch_log10) == pytest.approx(np.log10(late.truth.t50))


def test_score_study_counts_unresolved_right_only_where_the_truth_is_unresolvable():
    x = np.log10(np.logspace(9, 12, 10))
    study = SimpleNamespace(truth=_truth(x, 10.5, 10.45, 10.55, False, 0.5))  # 0.1 decades: resolvably sharp
    times = SimpleNamespace(t50_ci=(10**10.4, 10**10.6))

    def analysis(shape, times=times, censored=None):
        return SimpleNamespace(verdict=SimpleNamespace(shape=shape), times=times, censored=censored)

    assert score_study(analysis("sharp"), study) == {"verdict": "sharp", "shape": True, "changed": True,
                                                      "censored": True, "covers": True, "timed": True}
    assert not score_study(analysis("unresolved"), study)["shape"]
    assert not score_study(analysis("gradual", SimpleNamespace(t50_ci=(10**10.6, 10**10.8))), study)["covers"]
    border = SimpleNamespace(truth=_truth(x, 10.5, 10.2, 10.8, False, 0.5))
    assert score_study(analysis("unresolved"), border)["shape"] and not score_study(analysis("none", None), border)["shape"]
    left = SimpleNamespace(truth=_truth(x, 8.5, 8.4, 8.6, False, 0.5))
    bound = analysis("none", SimpleNamespace(t50_ci=(None, 1e9)), "left")
    assert score_study(bound, left) | {} == {"verdict": "none", "shape": True, "changed": False, "censored": True,
                                              "covers": True, "timed": True}


def test_none_is_right_where_the_data_cannot_show_the_change():
    x = np.log10(np.logspace(9, 12, 10))
    none = SimpleNamespace(verdict=SimpleNamespace(shape="none"), times=None, censored=None)
    inside = _truth(x, 10.5, 10.45, 10.55, False, 0.5)
    assert inside.detectable and not score_study(none, SimpleNamespace(truth=inside))["shape"]
    hidden = dataclasses.replace(inside, z=2.0)  # the noise hides it
    assert score_study(none, SimpleNamespace(truth=hidden)) | {} == {
        "verdict": "none", "shape": True, "changed": False, "censored": True, "covers": None, "timed": False}
    last = _truth(x, 11.9, 11.85, 11.95, False, 0.5)  # in the last interval: the last revision alone shows it
    assert last.position == "last"
    bound = SimpleNamespace(verdict=SimpleNamespace(shape="none"), times=SimpleNamespace(t50_ci=(10**x[-2], None)),
                            censored="right")
    assert score_study(bound, SimpleNamespace(truth=last)) | {} == {
        "verdict": "none", "shape": True, "changed": False, "censored": True, "covers": True, "timed": True}


def test_oracle_z_measures_the_change_against_the_noise():
    assert oracle_z([0, 0, 0, 10, 10, 10], [1.0] * 6) == pytest.approx(np.sqrt(150))
    assert oracle_z([5] * 6, [1.0] * 6) == 0.0
    assert oracle_z([0, 0, 3, 3], [0.0] * 4) == pytest.approx(np.sqrt(9 / 0.25))  # no noise: a quarter head
    rng = np.random.default_rng(0)
    studies = [sample_study(rng) for _ in range(60)]
    z = [d.truth.z for d in studies if not d.truth.flat]
    assert min(z) < DETECTABLE_Z < max(z)  # the space holds both


def test_a_narrower_space_is_respected():
    rng = np.random.default_rng(1)
    space = StudySpace(grid_kinds=("linear",), revisions=(6, 6), regimes=("aggregate",), p_flat=0.0)
    for _ in range(20):
        d = sample_study(rng, space)
        assert (d.factors["grid"], d.factors["revisions"], d.factors["regime"], d.factors["flat"]) == \
            ("linear", 6, "aggregate", False)


def test_factor_table_prints_every_bin_with_its_count():
    records = [{"grid": "log", "regime": "identity", "shape": True}, {"grid": "log", "regime": "aggregate", "shape": False},
               {"grid": "pythia", "regime": "identity", "shape": True}, {"grid": "pythia", "regime": "identity", "shape": None}]
    lines = factor_table(records, {"shape accuracy": ("shape", None)}, factors=("grid", "regime"))
    text = "\n".join(lines)
    assert "0.667 (3)" in lines[1]  # all: 2 of 3 scored records
    assert any(line.split()[:4] == ["grid", "log", "0.500", "(2)"] for line in lines), text
    assert any(line.split()[:4] == ["grid", "pythia", "1.000", "(1)"] for line in lines), text
    assert any(line.split()[:4] == ["regime", "identity", "1.000", "(2)"] for line in lines), text


def test_pair_bins_take_the_fewer_heads_and_the_wider_width():
    rng = np.random.default_rng(9)
    for _ in range(20):
        early, late = sample_pair(rng, 5.0)
        b = pair_bins(early, late)
        widths = {factor_bins(s)["true width"] for s in (early, late)}
        assert b["true width"] in widths and (b["true width"] == "gradual") == ("gradual" in widths)
        fewer = min(early.factors["n_switch"], late.factors["n_switch"])
        assert b["switching heads"] == factor_bins(early if early.factors["n_switch"] == fewer else late)["switching heads"]


def test_oracle_shape_z_is_the_power_of_a_test_that_knows_the_rest():
    """Known answers: a rise of width C is at distance 0 from the nearest rise of width C, a step's
    distance grows with the heads; and by simulation, the likelihood-ratio test of the step against
    its nearest width-C rise (both known) rejects at the 5 % level with power Phi(z - 1.645), so
    that below DETECTABLE_Z no test can be held to tell the shapes apart."""
    from scipy.stats import norm

    from stats.simulate import AggregateCurve
    from stats.study_space import oracle_shape_z

    tokens = np.logspace(9, 12, 10)
    assert oracle_shape_z(tokens, 256, AggregateCurve("logistic", 0.0, 0.3, 3e10, 0.5), 0.5) == pytest.approx(0, abs=1e-6)
    step = AggregateCurve("logistic", 0.02, 0.12, 3e10, 0.05)
    z = [oracle_shape_z(tokens, n, step, 0.5) for n in (64, 256, 1024)]
    assert z[0] < z[1] < z[2]
    n = 256
    mids = np.linspace(9.5, 11.5, 4001)
    p = step.rise(tokens)
    v = np.maximum(n * p * (1 - p), 0.25)
    dist = [np.sqrt(np.sum((n * (p - dataclasses.replace(step, t50=10**c, width_decades=0.5).rise(tokens))) ** 2 / v))
            for c in mids]
    assert min(dist) == pytest.approx(z[1], rel=1e-3)
    q = dataclasses.replace(step, t50=10 ** mids[int(np.argmin(dist))], width_decades=0.5).rise(tokens)
    rng = np.random.default_rng(5)

    def llr(k):  # log-likelihood ratio of the step against the width-C rise, binomial counts
        return np.sum(k * np.log(p / q) + (n - k) * np.log((1 - p) / (1 - q)), axis=-1)

    null = llr(rng.binomial(n, q, (4000, len(tokens))))
    power = np.mean(llr(rng.binomial(n, p, (4000, len(tokens)))) > np.quantile(null, 0.95))
    assert power == pytest.approx(norm.cdf(z[1] - 1.645), abs=0.08)


def test_a_shape_the_noise_hides_accepts_unresolved():
    x = np.log10(np.logspace(9, 12, 10))
    sharp = _truth(x, 10.5, 10.45, 10.55, False, 0.5)
    assert sharp.resolvable and sharp.accepted() == ("sharp",)
    hidden = dataclasses.replace(sharp, shape_z=DETECTABLE_Z / 2)
    assert not hidden.resolvable and hidden.accepted() == ("sharp", "unresolved")
    gradual = dataclasses.replace(_truth(x, 10.5, 9.5, 11.5, False, 0.5), shape_z=1.0)
    assert gradual.accepted() == ("gradual", "unresolved")  # never the other shape
    rng = np.random.default_rng(2)
    studies = [sample_study(rng) for _ in range(80)]
    shape_z = [d.truth.shape_z for d in studies if d.factors["regime"] == "aggregate" and not d.truth.flat]
    assert min(shape_z) < DETECTABLE_Z < max(shape_z)  # the space holds both
    assert all(np.isinf(d.truth.shape_z) for d in studies if d.factors["regime"] == "identity")


def test_oracle_t50_se_is_the_spread_of_the_midpoint_when_the_rest_is_known():
    """Known answer by simulation: fresh binomial counts around a logistic on a log grid, the midpoint
    alone fitted by maximum likelihood (floor, ceiling and width known): the spread of the fitted
    log10 t50 over many draws matches the oracle's standard error, and more heads shrink it."""
    from scipy.optimize import minimize_scalar

    from stats.simulate import AggregateCurve
    from stats.study_space import oracle_t50_se

    tokens = np.logspace(8, 11, 12)
    curve = AggregateCurve("logistic", 0.02, 0.3, 10**9.4, 0.8)
    n = 200
    se = oracle_t50_se(tokens, n, curve)
    rng = np.random.default_rng(3)
    fits = []
    for _ in range(400):
        k = rng.binomial(n, curve.rise(tokens))

        def nll(x50):
            p = np.clip(AggregateCurve("logistic", 0.02, 0.3, 10**x50, 0.8).rise(tokens), 1e-9, 1 - 1e-9)
            return -np.sum(k * np.log(p) + (n - k) * np.log(1 - p))

        fits.append(minimize_scalar(nll, bounds=(8.0, 11.0), method="bounded").x)
    assert np.std(fits) == pytest.approx(se, rel=0.15)
    assert oracle_t50_se(tokens, 4 * n, curve) == pytest.approx(se / 2, rel=0.01)


def test_oracle_median_se_is_the_spread_of_a_few_heads_median():
    """Known answer by simulation: the median of n switch-on times drawn from Normal(x50, s) spreads by
    the oracle's standard error (asymptotic; a little over the exact spread at three heads)."""
    from stats.study_space import oracle_median_se

    rng = np.random.default_rng(4)
    for n, rel in ((3, 0.12), (9, 0.08), (41, 0.05)):
        medians = np.median(rng.normal(9.0, 0.4, (20000, n)), axis=1)
        se = oracle_median_se(0.4, n)
        assert np.std(medians) == pytest.approx(se, rel=rel) and np.std(medians) <= se * 1.01
    assert oracle_median_se(0.4, 36) == pytest.approx(oracle_median_se(0.4, 9) / 2)


def test_a_pair_the_noise_hides_is_not_detectable():
    """Pairs whose 5x gap is under DETECTABLE_Z oracle standard errors are scored as not detectable,
    whatever the grid: the counts' noise for aggregate pairs, the spread of the followed heads'
    median for followed ones (three heads over a gradual rise place it no better)."""
    rng = np.random.default_rng(11)
    seen = set()
    for _ in range(200):
        early, late = sample_pair(rng, 5.0)
        b = pair_bins(early, late)
        assert early.truth.t50_se > 0 and late.truth.t50_se > 0
        gap_z = np.log10(5.0) / np.hypot(early.truth.t50_se, late.truth.t50_se)
        if gap_z < DETECTABLE_Z:
            assert b["detectable"] == "no"
        seen.add((early.factors["regime"], gap_z < DETECTABLE_Z))
    assert seen == {(r, hidden) for r in ("identity", "aggregate") for hidden in (True, False)}  # the space holds all


def test_sampled_studies_keep_their_shape_when_checkpoints_are_added():
    """Studies drawn from the space (10 revisions or more), read on every other revision and on all
    of them: refining may resolve a verdict or add doubt, never turn sharp into gradual or back."""
    from stats.config import AnalysisConfig
    from stats.space_scores import thinned_verdicts

    pairs = thinned_verdicts(24, AnalysisConfig(n_boot=20, progress=False), np.random.default_rng(7))
    assert sum(pairs.values()) >= 8
    assert not any({coarse, fine} == {"sharp", "gradual"} for coarse, fine in pairs), pairs
    assert any(coarse == fine != "none" for coarse, fine in pairs), pairs  # some verdicts are read on both grids


def test_a_curve_at_some_revisions_keeps_its_heads():
    from stats.tracked import Curve

    flags = np.arange(12).reshape(4, 3) % 2 == 0
    c = Curve("m", "bos", np.array(list("abcd")), np.array([1e9, 2e9, 4e9, 8e9]), flags.sum(1).astype(float),
              np.full(4, 3.0), identity=True, flags=flags, flags_at_init=np.zeros(3, bool))
    sub = c.at(np.array([0, 2, 3]))
    assert list(sub.revisions) == ["a", "c", "d"] and list(sub.k) == [2, 2, 1]
    assert (sub.flags == flags[[0, 2, 3]]).all() and sub.flags_at_init is c.flags_at_init
    assert list(c.head(2).revisions) == ["a", "b"]
