"""The verdict's cross-check (stats.shape.qualify_verdict): a class's continuous metric that
reads the other resolved shape is stated in the reason; printed token counts stay readable."""

import numpy as np
import pandas as pd
import pytest

from emergence.common.contract import MEAN_FIRST_TOKEN_METRIC
from stats.curve_analysis import analyse_curve
from stats.config import AnalysisConfig
from stats.tracked import Curve, TrackedResults
from stats.shape import ShapeVerdict, qualify_verdict
from stats.units import format_tokens

CFG = AnalysisConfig(n_boot=100, progress=False)
TOK = np.logspace(8, 11, 10)
REVS = np.array([f"step{i}" for i in range(10)])


def test_a_continuous_metric_that_reads_the_other_resolved_shape_is_stated():
    cont = {MEAN_FIRST_TOKEN_METRIC: {"reads": "gradual", "width_grid": [1.2, 2.0]},
            "mean_selectivity.bos": {"reads": "sharp", "width_grid": [0.0, 0.3]}}
    v = qualify_verdict(ShapeVerdict("sharp", "r", {}), cont)
    assert v.evidence["continuous_disagrees"] == [MEAN_FIRST_TOKEN_METRIC]
    assert "reads gradual (10-90 width between 1.2 and 2 decades): sharp at the threshold only" in v.reason
    g = qualify_verdict(ShapeVerdict("gradual", "g", {}), cont)
    assert g.evidence["continuous_disagrees"] == ["mean_selectivity.bos"] and "reads sharp" in g.reason
    quiet = qualify_verdict(ShapeVerdict("sharp", "r", {}), {"m": {"reads": "unresolved", "width_grid": [0, 2]}})
    assert quiet.reason == "r"  # a metric the grid cannot resolve does not disagree
    none = ShapeVerdict("none", "flat", {})
    assert qualify_verdict(none, cont) is none  # no shape, nothing to cross-check


def toy_bos_results():
    """The toy's BOS case: 2 of 3 heads cross the threshold between two checkpoints while the
    mean first-token attention rises smoothly from 0.10 to 0.30."""
    k = np.array([0, 0, 0, 0, 1, 3, 3, 3, 3, 3], float)
    curve = Curve("toy", "bos", REVS, TOK, k, np.full(10, 64.0), identity=True)
    attention = np.linspace(0.10, 0.30, 10)
    cont = pd.DataFrame({"model": "toy", "revision": REVS, "tokens": TOK, "metric": MEAN_FIRST_TOKEN_METRIC,
                         "value": attention})
    results = TrackedResults(curves=pd.DataFrame(), layers=pd.DataFrame(), continuous=cont)
    return curve, results


def test_a_threshold_jump_over_smoothly_rising_attention_is_said():
    """2 of 3 heads cross the threshold within one checkpoint interval while the mean first-token
    attention rises smoothly over three decades: the verdict says the metric reads gradual."""
    curve, results = toy_bos_results()
    v = analyse_curve(curve, CFG, np.random.default_rng(0), results).verdict
    assert v.shape in ("sharp", "unresolved")
    if v.shape == "sharp":
        assert v.evidence["continuous_disagrees"] == [MEAN_FIRST_TOKEN_METRIC]
        assert "sharp at the threshold only" in v.reason


def test_a_sharp_switch_of_many_heads_is_sharp_at_this_resolution():
    k = np.array([0, 0, 1, 2, 2, 150, 160, 162, 163, 163], float)
    curve = Curve("big", "bos", REVS, TOK, k, np.full(10, 256.0), identity=True)
    v = analyse_curve(curve, CFG, np.random.default_rng(0)).verdict
    assert v.shape == "sharp" and "weak" not in v.reason


@pytest.mark.parametrize("tokens, text", [(2.3e10, "23B"), (1.35e12, "1.35T"), (5.37e8, "537M"), (2100, "2.1K"),
                                          (1.67e18, "1.67e+18"), (None, "-"), (float("nan"), "-")])
def test_token_counts_print_as_people_write_them(tokens, text):
    assert format_tokens(tokens) == text
    assert "e+06T" not in format_tokens(1.67e18)
