"""``python -m stats``: the report from a real MLflow store and from a CSV; config
validation; one-line errors."""

import json
import commands
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf

import stats
from stats.config import StatsConfig
from stats.shape import SHAPES

pytestmark = pytest.mark.cli

CONF = str(Path(stats.__file__).resolve().parents[1] / "conf")


def run_stats(*overrides, cwd=None):
    return commands.run([sys.executable, "-m", "stats", *overrides], capture_output=True, text=True, cwd=cwd, timeout=300)


def store_overrides(store, out):
    return [f"source.tracking_uri={store['uri']}", f"tracking.uri={store['uri']}",
            f"tracking.artifacts={store['artifacts']}", f"output_dir={out}", f"hydra.run.dir={out}_hydra",
            "analysis.n_boot=200", "analysis.progress=false"]


def test_command_on_tracked_runs_writes_every_output(mlflow_store, tmp_path):
    out = tmp_path / "out"
    proc = run_stats(*store_overrides(mlflow_store, out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert len(summary["curves"]) == 12
    for c in summary["curves"]:
        assert {"model", "class", "shape", "t50", "t50_ci", "width_decades", "max_jump", "changepoint_tokens"} <= set(c)
        assert c["shape"] in SHAPES
        if c["shape"] != "none":
            lo, hi = c["t50_ci"]  # null: an open end (beyond the screened range)
            assert (lo is None or lo <= c["t50"]) and (hi is None or c["t50"] <= hi)
    assert {g["model"] for g in summary["gaps"]} == {"toy_neox", "toy_olmo"}
    for g in summary["gaps"]:
        assert {"model", "ratio", "ratio_ci", "p_value"} <= set(g)
    assert summary["has_pr_data"] and {p["model"] for p in summary["pr_lead"]} == {"toy_neox", "toy_olmo"}
    for p in summary["pr_lead"]:
        assert p["heads"] and "p_value" in p and all("lead_ratio" in h for h in p["heads"])
    olmo_bos = next(c for c in summary["curves"] if c["model"] == "toy_olmo" and c["class"] == "bos")
    assert olmo_bos["shape"] == "sharp"
    floors = summary["findings"]["layer_floor"]
    assert floors and all(f["holds"] for f in floors)
    conv = summary["findings"]["convergence"]
    assert conv and all(c["tokens_at_level"] for c in conv)
    figs = summary["figures"]
    for kind in ("curves", "layers", "timeline", "pr", "convergence", "continuous"):
        assert figs[kind], kind
    report = (out / "report.md").read_text()
    for kind, paths in figs.items():
        for p in paths:
            assert (out / p).is_file() and (out / p).stat().st_size > 1000
            assert f"]({p})" in report
    for t in ("curves", "fits", "gaps", "layer_floor", "layer_onset", "convergence", "pr_lead", "data"):
        assert (out / "tables" / f"{t}.csv").is_file()
    # logged as one MLflow run
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=mlflow_store["uri"])
    exp = client.get_experiment_by_name("emergence_stats")
    runs = client.search_runs([exp.experiment_id])
    assert len(runs) == 1
    names = {a.path for a in client.list_artifacts(runs[0].info.run_id)}
    assert {"summary.json", "report.md", "figures", "tables"} <= names
    assert "gap_ratio.toy_olmo" in runs[0].data.metrics


def test_command_on_a_csv_without_pr(reference_csv, tmp_path):
    out = tmp_path / "csvout"
    proc = run_stats("source=csv", f"source.path={reference_csv}", f"hydra.run.dir={out}", "tracking.log=false",
                     "analysis.n_boot=200", "analysis.progress=false")
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["pr_lead"] == [] and summary["has_pr_data"] is False
    assert "No PR data" in (out / "report.md").read_text()
    shapes = {(c["model"], c["class"]): c["shape"] for c in summary["curves"]}
    assert shapes[("olmo_1b_0724", "bos")] == "sharp"
    assert (out / "figures" / "timeline.png").is_file()


def test_command_on_the_bundled_study_data(tmp_path):
    out = tmp_path / "xu"
    proc = run_stats("source=xu2026", f"hydra.run.dir={out}", "tracking.log=false", "analysis.n_boot=150",
                     "analysis.sensitivity.n_boot=40", "analysis.sensitivity.grid=[30,100]", "analysis.progress=false",
                     "figures.enabled=false")
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["source"]["kind"] == "heads_csv" and summary["source"]["path"].endswith("stats/data/xu2026_heads.csv.gz")
    assert summary["reproduction"]["models"] == ["olmo_1b_0724", "pythia_1b"]
    assert {m["name"] for m in summary["milestones"]} >= {"induction formed", "BOS-50%"}
    assert len(summary["sensitivity"]["rows"]) == 2 * 2 * 2
    report = (out / "report.md").read_text()
    sections = [line for line in report.splitlines() if line.startswith("## ")]
    assert sections[0] == "## Reproduction of Xu (2026)"
    assert "## Milestones (first crossings)" in sections and "## Threshold sensitivity" in sections
    assert "| olmo_1b_0724 | milestone | 264B (BOS-50%) | 23B (induction formed) | 11.5 | [5.09, 26.4] | - |" in report
    for t in ("milestones", "sensitivity", "reproduction"):
        assert (out / "tables" / f"{t}.csv").is_file()


def test_command_rereads_a_per_head_file_at_other_thresholds(tmp_path):
    from test_heads import expected_bos, head_table

    path = tmp_path / "heads.csv"
    head_table("selectivity.").to_csv(path, index=False)
    out = tmp_path / "h"
    proc = run_stats("source=heads_csv", f"source.path={path}", f"hydra.run.dir={out}", "tracking.log=false",
                     "analysis.n_boot=30", "analysis.sensitivity.enabled=false", "analysis.progress=false", "figures.enabled=false",
                     "analysis.thresholds.bos=70")
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    bos = next(c for c in summary["curves"] if c["class"] == "bos")
    assert bos["k"] == expected_bos(70.0) and summary["thresholds"]["bos"] == 70.0
    assert summary["reproduction"] is None and summary["sensitivity"] is None


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["source=csv", "source.path=/nonexistent/curves.csv"], "no such CSV file: '/nonexistent/curves.csv'"),
        (["source=csv"], "source=csv needs source.path=FILE"),
        (["source.experiment=absent"], "no experiment 'absent'"),
        (["source=heads_csv"], "source=heads_csv needs source.path=FILE"),
        (["source=heads_csv", "source.path=/nonexistent/heads.csv"], "no such per-head file: '/nonexistent/heads.csv'"),
        (["analysis.thresholds.bos=-1"], "analysis.thresholds.bos=-1.0 must be a finite number > 0"),
    ],
)
def test_bad_input_is_one_clear_line(mlflow_store, tmp_path, overrides, message):
    proc = run_stats(*store_overrides(mlflow_store, tmp_path / "o"), "tracking.log=false", *overrides)
    assert proc.returncode == 2
    lines = [line for line in proc.stderr.strip().splitlines() if line.startswith("stats: error")]
    assert len(lines) == 1 and message in lines[0], proc.stderr[-1500:]


def test_config_schema_rejects_misspelt_keys_and_composes_defaults():
    with initialize_config_dir(config_dir=CONF, version_base=None):
        cfg = compose("stats")
        assert cfg.source.kind == "mlflow" and cfg.analysis.n_boot == 1000
        csv = compose("stats", overrides=["source=csv", "source.path=/x.csv"])
        assert csv.source.kind == "csv" and csv.source.path == "/x.csv"
        with pytest.raises(ConfigCompositionException):
            compose("stats", overrides=["analysis.n_bot=5"])
        with pytest.raises(ConfigCompositionException):
            compose("stats", overrides=["analysis.n_boot=many"])
        with pytest.raises(ConfigCompositionException, match="Available options in 'source'"):
            compose("stats", overrides=["source=sql"])
        with pytest.raises(ConfigCompositionException):
            compose("stats", overrides=["analysis.thresholds.sink=30"])
        with pytest.raises(ConfigCompositionException):
            compose("stats", overrides=["analysis.thresholds.bos=high"])
        xu = OmegaConf.to_object(compose("stats", overrides=["source=xu2026", "output_dir=/tmp/x"]))
        assert xu.source.kind == "heads_csv" and Path(xu.source.path).is_file()
        assert xu.analysis.thresholds.induction == 50.0 and xu.analysis.thresholds.local == 10.0
        assert [r.name for r in xu.analysis.milestones.rules] == ["induction formed", "BOS-10%", "BOS-30%", "BOS-50%", "BOS-70%"]
        assert xu.analysis.sensitivity.grid == [10, 20, 30, 50, 100]
        obj = OmegaConf.to_object(compose("stats", overrides=["output_dir=/tmp/x"]))
        assert isinstance(obj, StatsConfig)
        assert obj.tracking.uri.startswith("sqlite:///") and obj.tracking.uri.endswith("/outputs/mlflow.db")
        assert Path(obj.tracking.uri[len("sqlite:///"):]).is_absolute()


def test_default_output_dir_is_absolute_under_outputs_stats():
    with initialize_config_dir(config_dir=CONF, version_base=None):
        cfg = compose("stats", return_hydra_config=True)
        run_dir = cfg.hydra.run.dir
    root = str(stats.emergence_home())  # $EMERGENCE_HOME, else the working directory
    assert run_dir.startswith("${emergence_home:}/outputs/stats/") or run_dir.startswith(root + "/outputs/stats/")
    assert OmegaConf.select(cfg, "hydra.job.chdir") is False


def test_stats_never_imports_model_code():
    """stats reads emergence.common: the run contract and the head-class registry (emergence.common.contract,
    emergence.common.head_classes with its plug-in discovery emergence.common.plugins; and the schema walker
    emergence.common.checks), never the model code."""
    import json

    code = ("import sys, json, stats, stats.analysis, stats.figures, stats.report, stats.__main__; "
            "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('emergence', 'torch', "
            "'transformers'))))")
    proc = commands.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    imported = json.loads(proc.stdout.strip().splitlines()[-1])
    assert [m for m in imported if m != "emergence" and m.split(".")[:2] != ["emergence", "common"]] == []
