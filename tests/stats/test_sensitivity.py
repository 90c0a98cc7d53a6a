"""The threshold-sensitivity table: one row per (model, class, grid value), the analysis
threshold's row equal to the main analysis, counts falling as the threshold rises."""

import numpy as np
import pytest

from stats import analyse
from stats.config import AnalysisConfig, SensitivityConfig
from stats.sources.mlflow import read_mlflow


@pytest.fixture(scope="module")
def analysis(mlflow_store):
    r = read_mlflow(mlflow_store["uri"], mlflow_store["experiment"])
    cfg = AnalysisConfig(n_boot=60, progress=False, sensitivity=SensitivityConfig(grid=[10, 30, 50, 150], n_boot=40))
    return analyse(r, cfg)


def test_table_shape_and_rule(analysis):
    s = analysis.summary()["sensitivity"]
    assert s["grid"] == [10.0, 30.0, 50.0, 150.0] and s["n_boot"] == 40 and "one class" in s["rule"]
    rows = s["rows"]
    assert len(rows) == 2 * 2 * 4  # models x classes x grid
    keys = {(r["model"], r["class"], r["threshold"]) for r in rows}
    assert keys == {(m, c, g) for m in ("toy_neox", "toy_olmo") for c in ("bos", "induction") for g in (10.0, 30.0, 50.0, 150.0)}
    for r in rows:
        assert {"shape", "t50", "t50_ci", "gap_ratio", "gap_ratio_ci", "gap_p_value", "other_threshold"} <= set(r)
        assert r["other_threshold"] == (50.0 if r["class"] == "bos" else 30.0)
    table = analysis.tables()["sensitivity"]
    assert len(table) == len(rows) and {"t50_lo", "t50_hi", "gap_lo", "gap_hi"} <= set(table.columns)


def test_analysis_threshold_row_is_the_main_analysis(analysis):
    rows = analysis.summary()["sensitivity"]["rows"]
    for model in ("toy_neox", "toy_olmo"):
        row = next(r for r in rows if r["model"] == model and r["class"] == "bos" and r["threshold"] == 30.0)
        main = analysis.curve(model, "bos")
        assert row["is_analysis_threshold"] and row["shape"] == main.verdict.shape
        assert row["t50"] == pytest.approx(main.times.t50)
        assert row["gap_ratio"] == pytest.approx(analysis.gap(model).ratio)


def test_counts_fall_as_the_threshold_rises(analysis, mlflow_store):
    rows = analysis.summary()["sensitivity"]["rows"]
    heads = analysis.results.heads
    for model in ("toy_neox", "toy_olmo"):
        final = heads[(heads["model"] == model) & (heads["tokens"] == heads.loc[heads["model"] == model, "tokens"].max())]
        ks = []
        for g in (10.0, 30.0, 50.0, 150.0):
            row = next(r for r in rows if r["model"] == model and r["class"] == "bos" and r["threshold"] == g)
            assert row["k_last"] == int((final["selectivity.bos"] >= g).sum())
            ks.append(row["k_last"])
        assert ks == sorted(ks, reverse=True) and ks[0] > ks[-1]
    assert np.all([r["n_last"] == 64 for r in rows])
