"""Per-head input: reading both column styles, one-line refusals, thresholds applied at
analysis time, and the MLflow source re-counting from the runs' heads.csv."""

import gzip

import numpy as np
import pandas as pd
import pytest

from stats import analyse
from stats.config import AnalysisConfig, SensitivityConfig, ThresholdsConfig
from stats.sources.mlflow import read_mlflow
from stats.errors import StatsError
from stats.heads import apply_thresholds, thresholds_dict
from stats.sources.heads_csv import read_heads_csv

CLASSES = ("induction", "previous_token", "duplicate_token", "bos", "self", "local")
TOKENS = [1e9, 2e9, 4e9, 8e9, 16e9, 32e9]


def head_table(prefix=""):
    """2 layers x 4 heads x 6 revisions. Layer 1 head h has BOS selectivity 20 * (r + 1) * (h + 1)
    at revision r (so the count at threshold T is known in closed form); layer 0 stays at 1.
    Head (1, 0) has induction selectivity 100 from revision 2 on, (1, 1) 40 from revision 4 on."""
    rows = []
    for r, t in enumerate(TOKENS):
        for layer in range(2):
            for h in range(4):
                sel = {c: 1.0 for c in CLASSES}
                if layer == 1:
                    sel["bos"] = 20.0 * (r + 1) * (h + 1)
                    if h == 0 and r >= 2:
                        sel["induction"] = 100.0
                    if h == 1 and r >= 4:
                        sel["induction"] = 40.0
                row = {"model": "m", "revision": f"step{r}", "step": r, "tokens": t, "layer": layer, "head": h}
                row.update({f"{prefix}{c}": v for c, v in sel.items()})
                row["pr"] = 5.0 + layer
                rows.append(row)
    return pd.DataFrame(rows)


def expected_bos(threshold):
    return [sum(20.0 * (r + 1) * (h + 1) >= threshold for h in range(4)) for r in range(len(TOKENS))]


@pytest.mark.parametrize("prefix", ["", "selectivity."])
def test_reads_both_column_styles_and_counts_at_default_thresholds(tmp_path, prefix):
    path = tmp_path / "heads.csv"
    head_table(prefix).to_csv(path, index=False)
    r = read_heads_csv(path)
    assert {f"selectivity.{c}" for c in CLASSES} <= set(r.heads.columns)
    assert r.source["kind"] == "heads_csv" and r.source["thresholds"]["bos"] == 30.0
    bos = r.curve("m", "bos")
    assert list(bos.k) == expected_bos(30.0) and set(bos.n) == {8}
    ind = r.curve("m", "induction")
    assert list(ind.k) == [0, 0, 1, 1, 1, 1]  # the 40x head is below 50x
    lay = r.layers[(r.layers["class"] == "bos") & (r.layers["layer"] == 0)]
    assert (lay["k"] == 0).all() and (lay["n"] == 4).all()
    assert set(r.continuous["metric"]) >= {"mean_selectivity.bos", "pr.mean"}


def test_gzip_file_is_read(tmp_path):
    path = tmp_path / "heads.csv.gz"
    with gzip.open(path, "wt") as f:
        head_table().to_csv(f, index=False)
    assert list(read_heads_csv(path).curve("m", "bos").k) == expected_bos(30.0)


def test_thresholds_at_analysis_time_change_counts_flags_and_layers(tmp_path):
    path = tmp_path / "heads.csv"
    head_table().to_csv(path, index=False)
    raw = read_heads_csv(path)
    re = apply_thresholds(raw, {"bos": 70.0, "induction": 30.0})
    assert list(re.curve("m", "bos").k) == expected_bos(70.0)
    assert list(re.curve("m", "induction").k) == [0, 0, 1, 1, 2, 2]
    assert re.heads["flag.bos"].sum() == sum(expected_bos(70.0))
    lay = re.layers[(re.layers["class"] == "bos") & (re.layers["layer"] == 1)].sort_values("tokens")
    assert list(lay["k"]) == expected_bos(70.0)
    # the analysis applies its own thresholds, whatever the reader used
    a = analyse(raw, AnalysisConfig(n_boot=20, progress=False, thresholds=ThresholdsConfig(bos=70.0, induction=30.0),
                                    sensitivity=SensitivityConfig(enabled=False)))
    assert list(a.curve("m", "bos").curve.k) == expected_bos(70.0)
    assert a.summary()["thresholds"]["bos"] == 70.0
    conv = a.convergence[0].table  # final induction set at 30x: heads (1, 0) and (1, 1)
    assert list(conv["n_found"]) == [0, 0, 1, 1, 2, 2]


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: d.drop(columns=["layer"]), "lacks column(s) ['layer']"),
        (lambda d: d.drop(columns=list(CLASSES)), "has no selectivity column"),
        (lambda d: d.assign(bos=d["bos"].astype(object).where(d.index != 5, "high")), "column 'bos' row 5: 'high' is not a number"),
        (lambda d: d.assign(tokens=d["tokens"].astype(object).where(d.index != 3, "lots")), "column 'tokens' row 3: 'lots'"),
        (lambda d: d.assign(head=d["head"].astype(float).where(d.index != 2, 1.5)),
         "column 'head' row 2: 1.5 is not a non-negative integer"),
        (lambda d: pd.concat([d, d.iloc[[7]].assign(bos=999.0)]),
         "conflicting duplicate rows for (model, revision, layer, head) = ('m', 'step0', 1, 3)"),
        (lambda d: d.assign(tokens=d["tokens"].where(d.index != 0, 5.0)), "revision 'step0' of model 'm' has several token counts"),
    ],
)
def test_bad_tables_are_refused_with_one_line(tmp_path, mutate, message):
    path = tmp_path / "bad.csv"
    mutate(head_table()).to_csv(path, index=False)
    with pytest.raises(StatsError) as e:
        read_heads_csv(path)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_exact_duplicates_are_dropped_with_a_note(tmp_path):
    path = tmp_path / "dup.csv"
    d = head_table()
    pd.concat([d, d.iloc[[0, 1]]]).to_csv(path, index=False)
    r = read_heads_csv(path)
    assert len(r.heads) == len(d) and any("2 exact duplicate" in n for n in r.notes)


@pytest.mark.parametrize(
    "thresholds, message",
    [({"bos": 0}, "analysis.thresholds.bos=0"), ({"bos": float("inf")}, "positive finite"),
     ({"sink": 30}, "unknown class 'sink'"), ({"bos": "x"}, "analysis.thresholds.bos='x'")],
)
def test_threshold_validation(thresholds, message):
    with pytest.raises(StatsError, match=message.replace("(", r"\(").replace("[", r"\[")):
        thresholds_dict(thresholds)
    assert thresholds_dict({"bos": 12})["bos"] == 12.0 and thresholds_dict(None)["induction"] == 50.0


def test_mlflow_source_counts_from_heads_csv_at_analysis_thresholds(mlflow_store):
    r = read_mlflow(mlflow_store["uri"], mlflow_store["experiment"])
    assert "selectivity.bos" in r.heads.columns
    # at the screen's thresholds the per-head counts equal the logged count metrics
    same = apply_thresholds(r, None)
    for (m, c, rev), g in r.curves.groupby(["model", "class", "revision"]):
        row = same.curves[(same.curves["model"] == m) & (same.curves["class"] == c) & (same.curves["revision"] == rev)]
        assert int(row["k"].iloc[0]) == int(g["k"].iloc[0])
    # at 150x fewer BOS heads: exactly those with selectivity.bos >= 150
    hi = apply_thresholds(r, {"bos": 150.0})
    h = r.heads
    for (m, rev), g in h.groupby(["model", "revision"]):
        row = hi.curves[(hi.curves["model"] == m) & (hi.curves["class"] == "bos") & (hi.curves["revision"] == rev)]
        assert int(row["k"].iloc[0]) == int((g["selectivity.bos"] >= 150.0).sum())
    assert hi.curves.loc[hi.curves["class"] == "bos", "k"].sum() < same.curves.loc[same.curves["class"] == "bos", "k"].sum()


def test_mlflow_class_without_selectivity_falls_back_to_logged_counts(mlflow_store):
    r = read_mlflow(mlflow_store["uri"], mlflow_store["experiment"])
    r.heads = r.heads.drop(columns=["selectivity.local"])
    re = apply_thresholds(r, {"local": 1000.0})
    logged = r.curves[r.curves["class"] == "local"].sort_values(["model", "tokens"])["k"].to_numpy()
    kept = re.curves[re.curves["class"] == "local"].sort_values(["model", "tokens"])["k"].to_numpy()
    assert np.array_equal(logged, kept)
    assert any("count.local" in n for n in re.notes)
