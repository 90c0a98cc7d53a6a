"""Reading curves from a real MLflow store and from CSV; clear errors on bad input."""

import pandas as pd
import pytest

from stats.sources.csv import read_csv
from stats.sources.mlflow import read_mlflow
from stats.errors import StatsError


@pytest.mark.store
def test_read_mlflow_tidy_tables(mlflow_store):
    r = read_mlflow(mlflow_store["uri"], mlflow_store["experiment"])
    assert r.models == ["toy_neox", "toy_olmo"]
    assert set(r.curves.columns) >= {"model", "pretraining_corpus", "class", "revision", "tokens", "k", "n"}
    # one row per (model, class, revision); the unfinished run is ignored
    assert len(r.curves) == 2 * 6 * 10
    olmo = r.curves[r.curves["model"] == "toy_olmo"]
    assert olmo["tokens"].max() == 3e12
    assert (r.curves["n"] == 64).all()
    # counts agree with the per-head table and the per-layer metrics
    heads = r.heads
    assert {"layer", "head", "selectivity.bos", "flag.bos", "primary", "pr"} <= set(heads.columns)
    for (model, rev), g in heads.groupby(["model", "revision"]):
        row = r.curves[(r.curves["model"] == model) & (r.curves["revision"] == rev) & (r.curves["class"] == "bos")]
        assert int(row["k"].iloc[0]) == int(g["flag.bos"].sum())
        lay = r.layers[(r.layers["model"] == model) & (r.layers["revision"] == rev) & (r.layers["class"] == "bos")]
        assert lay["k"].sum() == g["flag.bos"].sum() and (lay["n"] == 8).all()
    assert "mean_first_token_attention" in set(r.continuous["metric"])
    c = r.curve("toy_neox", "bos")
    assert list(c.tokens) == sorted(c.tokens) and c.corpus == "synthetic"
    assert r.has_pr()


@pytest.mark.store
def test_read_mlflow_filters(mlflow_store):
    r = read_mlflow(mlflow_store["uri"], filter_string="params.model = 'toy_olmo'", read_heads=False)
    assert r.models == ["toy_olmo"] and r.heads is None
    r = read_mlflow(mlflow_store["uri"], models=["toy_neox"], sweep="sweep-1", read_heads=False)
    assert r.models == ["toy_neox"]
    r = read_mlflow(mlflow_store["uri"], status=None, read_heads=False)
    assert r.curves[r.curves["model"] == "toy_olmo"]["tokens"].max() == 4e12


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"experiment": "nope"}, "no experiment 'nope'"),
        ({"sweep": "other"}, "no runs of sweep 'other'"),
        ({"models": ["pythia_1b"]}, "not in experiment"),
        ({"filter_string": "params.model = 'absent'"}, "no complete screen runs"),
    ],
)
@pytest.mark.store
def test_read_mlflow_errors_name_the_value_and_the_choices(mlflow_store, kwargs, message):
    with pytest.raises(StatsError, match=message) as e:
        read_mlflow(mlflow_store["uri"], read_heads=False, **kwargs)
    assert "\n" not in str(e.value)


@pytest.mark.store
def test_missing_store_is_a_clear_error(tmp_path):
    with pytest.raises(StatsError, match="no MLflow store"):
        read_mlflow(f"sqlite:///{tmp_path}/absent.db")
    assert not (tmp_path / "absent.db").exists()


def test_read_csv_with_layers(tmp_path):
    rows = []
    for t, ks in ((1e9, (0, 1, 2)), (1e10, (1, 3, 5))):
        for layer, k in enumerate(ks):
            rows.append({"model": "m", "class": "bos", "tokens": t, "k": k, "n": 6, "layer": layer})
    rows.append({"model": "m", "class": "induction", "tokens": 1e9, "k": 1, "n": 12, "layer": None})
    path = tmp_path / "c.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    r = read_csv(path)
    bos = r.curve("m", "bos")
    assert list(bos.k) == [3, 9] and list(bos.n) == [18, 18]
    assert len(r.layers) == 6 and r.classes("m") == ["induction", "bos"]
    assert r.source["kind"] == "csv"


@pytest.mark.parametrize(
    "content, message",
    [
        ("model,class,tokens,k\nm,bos,1e9,1\n", "lacks column"),
        ("model,class,tokens,k,n\nm,bos,abc,1,4\n", "is not a number"),
        ("model,class,tokens,k,n\nm,bos,1e9,5,4\n", "0 <= k <= n"),
        ("model,class,tokens,k,n\n", "no rows"),
    ],
)
def test_read_csv_errors(tmp_path, content, message):
    path = tmp_path / "bad.csv"
    path.write_text(content)
    with pytest.raises(StatsError, match=message) as e:
        read_csv(path)
    assert str(path) in str(e.value) and "\n" not in str(e.value)


def test_read_csv_missing_file(tmp_path):
    with pytest.raises(StatsError, match="no such CSV file"):
        read_csv(tmp_path / "absent.csv")


def test_unknown_curve_names_the_choices(tmp_path):
    path = tmp_path / "c.csv"
    path.write_text("model,class,tokens,k,n\nm,bos,1e9,1,4\n")
    with pytest.raises(StatsError, match="models: \\['m'\\]"):
        read_csv(path).curve("x", "bos")


def test_read_csv_fills_an_empty_revision_from_the_rows_of_the_same_tokens(tmp_path):
    """Per-layer rows that leave ``revision`` empty take the name the whole-model rows give at the
    same token count (a partly empty column crashed the layer floor with a NaN before)."""
    p = tmp_path / "c.csv"
    p.write_text("model,class,tokens,k,n,layer,revision\n"
                 "m,bos,1000,0,16,,r1\nm,bos,2000,1,16,,r2\nm,bos,4000,5,16,,r3\n"
                 "m,bos,1000,0,8,0,\nm,bos,2000,1,8,1,\nm,bos,8000,3,8,1,\n")
    res = read_csv(p)
    assert res.curves["revision"].tolist() == ["r1", "r2", "r3"]
    assert sorted(res.layers["revision"].unique()) == ["r1", "r2", "t8000"]  # no name at 8000 tokens: t<tokens>


def test_the_layer_floor_reads_a_partly_named_csv(tmp_path):
    from stats import analyse
    from stats.config import AnalysisConfig, SensitivityConfig

    p = tmp_path / "c.csv"
    p.write_text("model,class,tokens,k,n,layer,revision\n"
                 + "".join(f"m,bos,{1000 * 2 ** i},{min(i * 3, 16)},16,,r{i}\n" for i in range(6))
                 + "m,bos,1000,0,8,0,\nm,bos,2000,1,8,1,\n")
    study = analyse(read_csv(p), AnalysisConfig(n_boot=20, progress=False, sensitivity=SensitivityConfig(enabled=False)))
    (floor,) = study.layer_floor
    assert floor.k == 1 and floor.heads_ever == 1
