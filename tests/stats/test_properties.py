"""Property-based tests (hypothesis): no legitimate curve crashes the statistics.

Legitimate input: any number of revisions >= 1 with distinct positive token counts,
any head totals n >= 1 and any counts 0 <= k <= n, including curves flat at 0, flat
at n and single points. For each, the fits, the verdict, the intervals, the whole
analysis, the figures and the report must come out, and what they report must be
coherent (a verdict among the three, probabilities in [0, 1], an interval that holds
its estimate).
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stats import analyse, analyse_curve, fit_all
from stats.config import AnalysisConfig
from stats.tracked import Curve, TrackedResults
from stats.figures import curve_figure, wilson_interval
from stats.report import write_outputs
from stats.shape import SHAPES

SETTINGS = settings(max_examples=40, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
CONFIG = AnalysisConfig(n_boot=40, progress=False)


@st.composite
def curves(draw, max_points: int = 12, max_n: int = 300):
    """A curve: m distinct log-spaced-ish token counts, totals n >= 1, 0 <= k <= n."""
    m = draw(st.integers(1, max_points))
    gaps = draw(st.lists(st.floats(0.05, 1.5), min_size=m, max_size=m))
    x = 6.0 + np.cumsum(gaps)
    n_const = draw(st.booleans())
    if n_const:
        n = np.full(m, draw(st.integers(1, max_n)))
    else:
        n = np.array(draw(st.lists(st.integers(1, max_n), min_size=m, max_size=m)))
    kind = draw(st.sampled_from(["random", "zero", "full", "monotone"]))
    if kind == "zero":
        k = np.zeros(m, int)
    elif kind == "full":
        k = n.copy()
    else:
        u = np.array(draw(st.lists(st.floats(0, 1), min_size=m, max_size=m)))
        if kind == "monotone":
            u = np.sort(u)
        k = np.floor(u * (n + 1)).clip(0, n).astype(int)
    return Curve(model="m", head_class="bos", revisions=np.array([f"r{i}" for i in range(m)]),
                 tokens=10 ** x, k=k.astype(float), n=n.astype(float))


def _coherent_interval(ci, value, rel=1e-6):
    assert ci is not None and len(ci) == 2
    lo, hi = ci
    assert lo <= hi * (1 + rel)
    assert lo * (1 - rel) <= value <= hi * (1 + rel)


@SETTINGS
@given(curves())
def test_fits_are_finite_probabilities(curve):
    if len(curve) < 3:
        return  # fits need 3 revisions; analyse_curve says so (next test)
    fits, disp = fit_all(curve.tokens, curve.k, curve.n)
    assert set(fits) == {"logistic", "step", "ramp", "constant"}
    for fit in fits.values():
        p = fit.predict(curve.tokens)
        assert np.all((p >= 0) & (p <= 1))
        assert np.isfinite(fit.loglik)
    assert disp.phi >= 1.0


@SETTINGS
@given(curves(), st.integers(0, 2**16))
def test_analyse_curve_never_raises_and_is_coherent(curve, seed):
    ca = analyse_curve(curve, CONFIG, np.random.default_rng(seed))
    assert ca.verdict.shape in SHAPES
    assert ca.verdict.reason
    d = ca.to_dict()
    json.dumps(d, default=float)  # serialisable as written to summary.json
    if np.ptp(curve.k / curve.n) == 0:
        assert ca.verdict.shape == "none"  # a flat curve shows no transition
    if ca.censored:  # a bound at the first or last revision, an open interval, no transition inside
        t = ca.times
        assert ca.verdict.shape == "none" and d["censored"] == ca.censored
        assert t.t50 == (curve.tokens[0] if ca.censored == "left" else curve.tokens[-1])
        assert t.t50_ci == ([None, t.t50] if ca.censored == "left" else [t.t50, None])
    elif ca.times is not None:
        t = ca.times
        lo, hi = t.t50_ci
        _coherent_interval([curve.tokens.min() if lo is None else lo, curve.tokens.max() if hi is None else hi], t.t50)
        assert curve.tokens.min() * (1 - 1e-9) <= t.t50 <= curve.tokens.max() * (1 + 1e-9)
        assert t.width_decades > 0


@SETTINGS
@given(curves(max_points=8, max_n=60))
def test_curve_figure_draws_any_curve(tmp_path_factory, curve):
    ca = analyse_curve(curve, CONFIG, np.random.default_rng(0))
    path = tmp_path_factory.mktemp("fig") / "curve.png"
    curve_figure(ca, path)
    assert path.stat().st_size > 1000


@SETTINGS
@given(st.integers(1, 500), st.data())
def test_wilson_interval_holds_the_observed_fraction(n, data):
    k = data.draw(st.integers(0, n))
    lo, hi = wilson_interval(k, n)
    assert 0.0 <= lo <= k / n <= hi <= 1.0


def _results(curve_list) -> TrackedResults:
    rows = []
    for c in curve_list:
        for r, t, k, n in zip(c.revisions, c.tokens, c.k, c.n):
            rows.append({"model": c.model, "pretraining_corpus": "x", "class": c.head_class, "revision": r,
                         "tokens": t, "k": k, "n": n})
    return TrackedResults(curves=pd.DataFrame(rows),
                          layers=pd.DataFrame(columns=["model", "class", "revision", "tokens", "layer", "k", "n"]))


@settings(max_examples=12, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(curves(max_points=10, max_n=64), curves(max_points=10, max_n=64))
def test_whole_report_is_written_for_any_pair_of_curves(tmp_path_factory, bos, induction):
    induction.head_class = "induction"
    induction.tokens = bos.tokens[: len(induction)] if len(induction) <= len(bos) else induction.tokens
    out = tmp_path_factory.mktemp("report")
    analysis = analyse(_results([bos, induction]), CONFIG)
    paths = write_outputs(analysis, out, figures=True)
    summary = json.loads(paths["summary"].read_text())
    assert {c["class"] for c in summary["curves"]} == {"bos", "induction"}
    assert paths["report"].read_text().startswith("# ")
    assert not summary["figures"].get("skipped"), summary["figures"]["skipped"]


@pytest.mark.parametrize("k, n", [([0] * 10, [48] * 10), ([48] * 10, [48] * 10), ([0], [4]), ([3], [4]),
                                  ([0, 0, 0, 0, 0, 0, 0, 1, 3, 3], [48] * 10)])
def test_edge_curves_give_a_report(tmp_path, k, n):
    """Flat at 0 (the 48-head case that crashed the figures), flat at n, single points."""
    tokens = np.logspace(6, 9, len(k))
    c = Curve("m", "bos", np.array([f"r{i}" for i in range(len(k))]), tokens, np.array(k, float), np.array(n, float))
    analysis = analyse(_results([c]), CONFIG)
    paths = write_outputs(analysis, tmp_path, figures=True)
    summary = json.loads(paths["summary"].read_text())
    assert not summary["figures"]["skipped"]
    assert bool(summary["figures"]["curves"]) == (max(k) > 0)  # a class with no head at any revision: no figure
    if len(k) < 3 or len(set(k)) == 1:
        assert summary["curves"][0]["shape"] == "none"


def test_a_figure_that_cannot_be_drawn_is_skipped_with_a_note(tmp_path, monkeypatch):
    import stats.figures as figures

    def broken(*args, **kwargs):
        raise ValueError("cannot draw this")

    monkeypatch.setattr(figures, "timeline_figure", broken)
    c = Curve("m", "bos", np.array([f"r{i}" for i in range(6)]), np.logspace(6, 9, 6),
              np.array([0, 0, 5, 20, 40, 45.0]), np.full(6, 48.0))
    paths = write_outputs(analyse(_results([c]), CONFIG), tmp_path, figures=True)
    summary = json.loads(paths["summary"].read_text())
    assert summary["figures"]["skipped"] == ["timeline.png: ValueError: cannot draw this"]
    assert summary["figures"]["curves"]  # the others are still drawn
    report = paths["report"].read_text()
    assert "Figure skipped" in report and "timeline.png" in report


def test_ties_in_tokens_are_refused_with_a_clear_message(tmp_path):
    from stats import StatsError, read_csv

    path = tmp_path / "tie.csv"
    pd.DataFrame({"model": ["m"] * 3, "class": ["bos"] * 3, "revision": ["a", "b", "c"],
                  "tokens": [1e9, 1e9, 2e9], "k": [1, 2, 3], "n": [8, 8, 8]}).to_csv(path, index=False)
    with pytest.raises(StatsError, match=r"revisions \['a', 'b'\] have the same token count 1e\+09"):
        read_csv(path)
    pd.DataFrame({"model": ["m"] * 3, "class": ["bos"] * 3, "revision": ["a", "a", "c"],
                  "tokens": [1e9, 1e9, 2e9], "k": [1, 1, 3], "n": [8, 8, 8]}).to_csv(path, index=False)
    assert len(read_csv(path).curves) == 2  # an exact repeat is kept once
