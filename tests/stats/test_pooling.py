"""Pooling across training runs (stats/pooling.py): known answers of the random-effects
meta-analysis on small cases, censored runs as bounds, the seed key of the three sources
(MLflow params, the ``seed`` column of source=csv and source=heads_csv), and the pooled
gaps in summary.json, the report and the figures."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from emergence.common import contract as C
from stats.analysis import analyse
from stats.config import AnalysisConfig
from stats.sources.csv import read_csv
from stats.sources.mlflow import read_mlflow
from stats.sources.heads_csv import read_heads_csv
from stats.pooling import (Effect, agreement, censored_likelihood, hartung_knapp, meta_analysis, pooled_runs,
                           q_profile, variance_share)
from stats.simulate import logspaced_tokens, seed_group, seed_group_frame


def fast_config(**kw) -> AnalysisConfig:
    cfg = AnalysisConfig(n_boot=100, progress=False, **kw)
    cfg.shape.n_perm = 99
    cfg.findings.n_perm = 99
    cfg.sensitivity.enabled = False
    return cfg


# --- the meta-analysis: known answers -------------------------------------------------------------

def test_identical_runs_give_the_fixed_effect_t_interval():
    # four runs at 0.3 decades, within-run variance 0.01: tau^2 = 0, q = 0 -> scale 1 (truncated),
    # se = sqrt(0.01 / 4) = 0.05, CI 0.3 +- t_3 0.05, prediction 0.3 +- t_2 0.05, p = T_3.sf(6)
    fit = hartung_knapp([0.3] * 4, [0.01] * 4)
    assert fit.estimate == pytest.approx(0.3) and fit.tau2 == 0 and fit.i2 == 0
    half = sps.t.ppf(0.975, 3) * 0.05
    assert fit.ci == pytest.approx([0.3 - half, 0.3 + half])
    assert fit.prediction_interval == pytest.approx([0.3 - sps.t.ppf(0.975, 2) * 0.05, 0.3 + sps.t.ppf(0.975, 2) * 0.05])
    assert fit.p_value == pytest.approx(sps.t.sf(6.0, 3))
    assert fit.tau2_ci == [0.0, 0.0]


def test_paule_mandel_solves_its_estimating_equation_and_hartung_knapp_scale_is_one():
    y = np.array([0.1, 0.6, 0.2, 0.9, -0.2])
    v = np.array([0.01, 0.02, 0.01, 0.03, 0.02])
    fit = hartung_knapp(y, v)
    w = 1 / (v + fit.tau2)
    mu = (w * y).sum() / w.sum()
    assert fit.estimate == pytest.approx(mu)
    assert (w * (y - mu) ** 2).sum() == pytest.approx(len(y) - 1, abs=1e-3)  # generalised Q = k - 1
    half = sps.t.ppf(0.975, 4) * math.sqrt(1 / w.sum())  # scale q = 1 at the PM solution
    assert fit.ci == pytest.approx([mu - half, mu + half], abs=1e-4)
    q = (y - (y / v).sum() / (1 / v).sum()) ** 2 / v
    assert fit.i2 == pytest.approx(1 - 4 / q.sum())
    lo, hi = q_profile(y, v)
    for t2, target in ((lo, sps.chi2.ppf(0.975, 4)), (hi, sps.chi2.ppf(0.025, 4))):
        w2 = 1 / (v + t2)
        m2 = (w2 * y).sum() / w2.sum()
        assert (w2 * (y - m2) ** 2).sum() == pytest.approx(target, rel=1e-4)
    assert lo < fit.tau2 < hi


def test_a_ratio_of_one_is_not_called_separated_and_a_clear_gap_is():
    null = hartung_knapp([0.05, -0.04, 0.02, -0.01, 0.0], [0.01] * 5)
    assert null.ci[0] < 0 < null.ci[1] and null.p_value > 0.2
    gap = hartung_knapp([0.45, 0.5, 0.52, 0.48, 0.47], [0.01] * 5)
    assert gap.ci[0] > 0 and gap.p_value < 1e-3


def test_a_censored_run_enters_as_a_bound_not_as_a_point():
    points = [Effect(f"r{i}", 0.3, 0.01) for i in range(4)]
    low = Effect("c", 0.0, 0.01, "lower")  # ratio >= 1: consistent with the others, nothing pulls it down
    fit = meta_analysis(points + [low])
    assert fit.n_bounds == 1 and "interval-censored" in fit.method
    assert fit.estimate == pytest.approx(0.3, abs=0.01)  # as a point at 0.0 it would be 0.24
    as_point = meta_analysis(points + [Effect("c", 0.0, 0.01)])
    assert as_point.estimate == pytest.approx(0.24, abs=0.01)
    # a bound above the others pulls the estimate up; one far below changes nothing
    assert meta_analysis(points + [Effect("c", 0.8, 0.01, "lower")]).estimate > 0.35
    far = meta_analysis(points + [Effect("c", -5.0, 0.01, "lower")])
    ml = censored_likelihood([0.3] * 4, [0.01] * 4, [None] * 4)
    assert far.estimate == pytest.approx(ml.estimate, abs=1e-3) and far.ci == pytest.approx(ml.ci, abs=1e-3)


def test_runs_that_are_all_lower_bounds_give_a_one_sided_pooled_bound():
    fit = meta_analysis([Effect(f"r{i}", b, 0.01, "lower") for i, b in enumerate([0.4, 0.5, 0.45])])
    assert fit.bound == "lower" and fit.estimate is None and fit.ci[1] is None
    assert 0.2 < fit.ci[0] < 0.5 and fit.p_value < 0.05
    d = fit.to_dict()
    assert d["ratio"] is None and d["ci"][0] == pytest.approx(10 ** fit.ci[0])


def test_without_censoring_the_likelihood_interval_is_hartung_knapps():
    ml = censored_likelihood([0.3] * 4, [0.01] * 4, [None] * 4)
    hk = hartung_knapp([0.3] * 4, [0.01] * 4)
    assert ml.estimate == pytest.approx(0.3, abs=1e-4) and ml.tau2 == pytest.approx(0, abs=1e-6)
    assert ml.ci == pytest.approx(hk.ci, abs=1e-4) and ml.p_value == pytest.approx(hk.p_value, rel=1e-3)
    # runs that scatter more than their variances: q > 1 widens both alike (tau^2 by ML here, PM there)
    y, v = [0.1, 0.5, 0.2, 0.9, 0.4], [0.004, 0.01, 0.006, 0.02, 0.008]
    ml, hk = censored_likelihood(y, v, [None] * 5), hartung_knapp(y, v)
    assert ml.ci[0] == pytest.approx(hk.ci[0], abs=0.05) and ml.ci[1] == pytest.approx(hk.ci[1], abs=0.05)


def test_bounds_among_few_runs_keep_the_interval_finite_and_on_the_bounds_side():
    """The toy's five seeds (2026-12-04): three points and two lower bounds. Profiling tau out
    gave [2e-5, 6e8]x; at tau_hat the interval is a few tenths of a decade either side."""
    y, v = [-0.222, 0.084, -0.333, 0.278, 0.278], [0.016, 0.036, 0.011, 0.0045, 0.0039]
    fit = censored_likelihood(y, v, [None, None, None, "lower", "lower"])
    points = hartung_knapp(y[:3], v[:3])
    assert fit.estimate > points.estimate                       # the bounds pull it up
    assert fit.ci[0] is not None and fit.ci[1] is not None and fit.ci[1] - fit.ci[0] < 3
    assert fit.ci[0] < fit.estimate < fit.ci[1]


def test_variance_share_data_against_weight_seeds():
    data = [Effect(f"d{i}", y, 0.001) for i, y in enumerate([0.0, 0.5, 1.0])]
    weight = [Effect(f"w{i}", y, 0.001) for i, y in enumerate([0.3, 0.31, 0.29])]
    share = variance_share(data + weight, ["data"] * 3 + ["weight"] * 3, 0.95, "pm")
    assert share["share_data"] == pytest.approx(1.0, abs=1e-3) and share["tau2_weight"] == pytest.approx(0, abs=1e-6)
    assert share["tau2_data"] == pytest.approx(0.25 - 0.001, rel=1e-3)  # var of 0, .5, 1 less the within variance
    assert variance_share(data, ["data"] * 3, 0.95, "pm") is None


def test_which_runs_are_pooled_and_shape_agreement():
    assert pooled_runs(["both", "both", "data", "weight"], 2)[0] == [0, 1]
    assert pooled_runs(["data", "data", "data"], 2)[0] == [0, 1, 2]
    idx, note = pooled_runs(["data", "weight"], 2)
    assert idx == [0, 1] and "not independent" in note
    a = agreement(["sharp", "sharp", "gradual"])
    assert a["modal"] == "sharp" and a["share"] == pytest.approx(2 / 3) and not a["unanimous"]


# --- groups of runs from the three sources ----------------------------------------------------------

@pytest.fixture(scope="module")
def seeds_csv(tmp_path_factory):
    rng = np.random.default_rng(3)
    runs = seed_group("aggregate", logspaced_tokens(), 3.0, 0.05, 4, rng)
    path = tmp_path_factory.mktemp("seeds") / "seeds.csv"
    seed_group_frame("sim", runs).to_csv(path, index=False)
    return path


def test_csv_seed_column_gives_one_curve_per_run_and_a_pooled_gap(seeds_csv, tmp_path):
    from stats.report import write_outputs

    results = read_csv(seeds_csv)
    assert results.models == [f"sim [seed {s}]" for s in (1, 2, 3, 4)]
    assert results.seed_groups() == {"sim": results.models}
    analysis = analyse(results, fast_config())
    (group,) = analysis.pooled
    assert group.n_seeds == 4 and all(r["used"] for r in group.per_seed)
    assert group.pooled.ci[0] < math.log10(3.0) < group.pooled.ci[1]  # the known pooled ratio
    assert group.pooled.p_value < 0.05
    paths = write_outputs(analysis, tmp_path / "out")
    summary = json.loads(paths["summary"].read_text())
    (g,) = summary["pooled_gaps"]
    for key in ("model", "n_seeds", "ratio", "ci", "p_value", "prediction_interval", "tau2", "i2", "per_seed"):
        assert key in g
    assert g["model"] == "sim" and len(g["per_seed"]) == 4 and g["ratio"] == pytest.approx(10 ** group.pooled.estimate)
    assert {"seeds", "forest"} <= set(k for k, v in paths["figures"].items() if v)
    for rel in paths["figures"]["seeds"] + paths["figures"]["forest"]:
        assert (tmp_path / "out" / rel).stat().st_size > 10_000
    report = paths["report"].read_text()
    assert "## Seeds: one model, many training runs" in report and "| sim [seed 1] | both |" in report
    assert "![forest_sim](figures/forest_sim.png)" in report
    assert (tmp_path / "out" / "tables" / "pooled_gaps.csv").is_file()


def test_csv_seed_kind_is_checked_and_one_seed_keeps_the_bare_name(tmp_path):
    frame = pd.DataFrame({"model": "m", "class": "bos", "tokens": [1e9, 2e9], "k": [1, 2], "n": 10,
                          "seed": 1, "seed_kind": ["both", "odd"]})
    frame.to_csv(tmp_path / "bad.csv", index=False)
    from stats.errors import StatsError

    with pytest.raises(StatsError, match="column 'seed_kind' row 1: 'odd' is not a seed kind; valid: data, weight, both"):
        read_csv(tmp_path / "bad.csv")
    frame.assign(seed_kind="data").to_csv(tmp_path / "one.csv", index=False)
    one = read_csv(tmp_path / "one.csv")
    assert one.models == ["m"] and one.seeds["m"].kind == "data"


def test_heads_csv_seed_column(tmp_path):
    rows = []
    for seed in (1, 2):
        for r, t in enumerate([1e9, 2e9, 4e9]):
            for h in range(4):
                rows.append({"model": "m", "seed": seed, "revision": f"step{r}", "tokens": t, "layer": 0, "head": h,
                             "bos": 40.0 if h < r + seed - 1 else 1.0, "induction": 1.0})
    pd.DataFrame(rows).to_csv(tmp_path / "heads.csv", index=False)
    got = read_heads_csv(tmp_path / "heads.csv")
    assert got.models == ["m [seed 1]", "m [seed 2]"]
    assert list(got.curve("m [seed 2]", "bos").k) == [1, 2, 3]  # the same (revision, head) twice: two runs, no clash
    assert got.seed_groups() == {"m": ["m [seed 1]", "m [seed 2]"]}


@pytest.mark.store
def test_mlflow_runs_are_keyed_on_their_seed_and_old_runs_are_seed_none(tmp_path):
    from conftest import simulate_heads, write_sweep
    from mlflow.tracking import MlflowClient

    uri, artifacts = f"sqlite:///{tmp_path}/mlflow.db", tmp_path / "mlartifacts"
    rng = np.random.default_rng(5)
    toks = [2e8 * 2 ** i for i in range(8)]
    revs = [f"step{i}" for i in range(8)]
    client = MlflowClient(tracking_uri=uri)
    for seed, kind in (("1", "both"), ("2", "both"), ("1", "data")):
        write_sweep(uri, artifacts, "emergence", "m", "gpt_neox", "synthetic", 4, 4, toks, revs,
                    simulate_heads(4, 4, np.array(toks), rng, t_bos=4e9, t_ind=1e9), sweep=f"s{seed}{kind}")
        for run in client.search_runs([client.get_experiment_by_name("emergence").experiment_id],
                                      f"tags.`{C.SWEEP_TAG}` = 's{seed}{kind}'"):
            for key, value in C.RunSeed(seed, kind, "m").params().items():
                client.log_param(run.info.run_id, key, value)
    write_sweep(uri, artifacts, "emergence", "old", "gpt_neox", "synthetic", 4, 4, toks, revs,
                simulate_heads(4, 4, np.array(toks), rng), sweep="legacy")
    got = read_mlflow(uri)
    assert got.models == ["m [data-seed 1]", "m [seed 1]", "m [seed 2]", "old"]
    assert "old" not in got.seeds and got.seeds["m [data-seed 1]"] == C.RunSeed("1", "data", "m")
    assert set(got.curves.loc[got.curves["model"] == "m [seed 2]", "revision"]) == set(revs)
    assert not any("several complete runs" in n for n in got.notes)  # three seeds at one revision: three points
    analysis = analyse(got, fast_config())
    (group,) = analysis.pooled
    assert group.model == "m" and [r["used"] for r in group.per_seed] == [False, True, True]


def test_a_toy_run_from_before_the_seed_params_reads_its_recipe_seed():
    params = {C.MODEL_PARAM: "toy_neox", "model.recipe.seed": "3", "model.recipe.data_seed": "None"}
    assert C.run_seed(params) == C.RunSeed("3", "both", "toy_neox")
    assert C.run_seed({**params, "model.recipe.init_seed": "0"}) == C.RunSeed("3", "data", "toy_neox")
    assert C.run_seed({C.MODEL_PARAM: "pythia_1b"}) is None
    assert C.RunIdentity.from_params({**params, C.TOKENS_PARAM: "1"}).seed.label == "seed 3"
