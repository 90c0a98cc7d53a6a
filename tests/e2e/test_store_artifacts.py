"""The main job end to end on toy shapes other than the default, through the statistics
report, into a store whose folder keeps every artifact of the study.

Run from a working directory outside the checkout with ``tracking.uri`` pointing at a
temporary folder: every screen run's ``heads.csv`` and the statistics run's report
must land in ``<store folder>/mlartifacts``, nowhere else.
"""

import os
import commands
import sys
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from emergence.common.store import artifact_location, local_store_dir


@pytest.mark.parametrize("layers, heads, printed", [(6, 8, True), (2, 2, False)])
def test_main_job_on_other_toy_shapes_writes_the_report_and_keeps_artifacts_beside_the_store(tmp_path, layers, heads, printed):
    """``printed`` False: ``report=false``, which prints no summary; the statistics run all the same
    (``stats=true``: they were started from the summary printer, and skipped)."""
    import mlflow

    store = tmp_path / "study"
    work = tmp_path / "elsewhere"
    work.mkdir()
    uri = f"sqlite:///{store}/m.db"
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1")
    cmd = [sys.executable, "-m", "emergence", "model=toy_neox", "recipe@model.recipe=fast_neox",
           f"model.recipe.n_layers={layers}", f"model.recipe.n_heads={heads}", f"cache.toy_dir={tmp_path}/toy",
           f"tracking.uri={uri}", "corpus.n_sequences=64", "corpus.batch_size=32"] + ([] if printed else ["report=false"])
    proc = commands.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "stats report failed" not in out, out[-3000:]
    summary = [line for line in proc.stdout.splitlines() if line.startswith("stats: ")]
    if printed:
        report = Path(summary[0].split("report: ")[1].split(";")[0])
        assert report.is_file() and "## Curves" in report.read_text()
    else:
        assert not summary and "When circuits form" not in proc.stdout

    client = mlflow.MlflowClient(uri)
    runs = client.search_runs([client.get_experiment_by_name("emergence").experiment_id])
    screen_runs = [r for r in runs if r.data.tags.get("emergence.kind") == "screen"]  # and the job's parent run
    stats_runs = client.search_runs([client.get_experiment_by_name("emergence_stats").experiment_id])
    assert len(screen_runs) == 4 and len(runs) == 5 and len(stats_runs) == 1  # fast_neox: 4 log-spaced checkpoints
    beside = (store / "mlartifacts").resolve()
    for run in runs + stats_runs:
        local = Path(unquote(urlparse(run.info.artifact_uri).path)).resolve()
        assert local.is_relative_to(beside), (run.info.artifact_uri, beside)
    for run in screen_runs:
        root = Path(unquote(urlparse(run.info.artifact_uri).path))
        rows = (root / "heads.csv").read_text().splitlines()
        assert len(rows) == 1 + layers * heads  # header + one row per head
        assert (run.data.params["n_layers"], run.data.params["n_heads"]) == (str(layers), str(heads))
    stats_root = Path(unquote(urlparse(stats_runs[0].info.artifact_uri).path))
    assert (stats_root / "report.md").is_file() and (stats_root / "summary.json").is_file()
    assert not (work / "mlartifacts").exists() and not (work / "mlruns").exists()


def test_artifact_location_rules(tmp_path):
    db = tmp_path / "s" / "m.db"
    assert local_store_dir(f"sqlite:///{db}") == db.parent.resolve()
    assert artifact_location(f"sqlite:///{db}", "exp") == (db.parent / "mlartifacts" / "exp").resolve().as_uri()
    assert artifact_location(f"sqlite:///{db}", "exp", str(tmp_path / "elsewhere")) == \
        (tmp_path / "elsewhere" / "exp").resolve().as_uri()
    assert artifact_location(f"file://{tmp_path}/fs", "exp") == (tmp_path / "fs" / "mlartifacts" / "exp").as_uri()
    assert artifact_location("http://127.0.0.1:5000", "exp") is None  # the server chooses


def test_a_moved_study_reads_back_after_relocate(tmp_path):
    """Copy a store folder elsewhere, delete the original, relocate: stats reads every heads.csv."""
    import shutil

    import mlflow
    import pandas as pd

    from stats.sources.mlflow import read_mlflow

    old = tmp_path / "old"
    uri = f"sqlite:///{old}/mlflow.db"
    client = mlflow.MlflowClient(uri)
    exp = client.create_experiment("emergence", artifact_location=artifact_location(uri, "emergence"))
    for i, tokens in enumerate((10, 100, 1000)):
        run = client.create_run(exp, tags={"emergence.status": "complete"})
        for k, v in {"model": "m", "revision": f"r{i}", "tokens": str(tokens), "n_layers": "1", "n_heads": "2"}.items():
            client.log_param(run.info.run_id, k, v)
        client.log_metric(run.info.run_id, "count.bos", i)
        heads = pd.DataFrame({"layer": [0, 0], "head": [0, 1], "selectivity.bos": [1.0, 40.0 * i],
                              "flag.bos": [0, int(i > 0)]})
        client.log_text(run.info.run_id, heads.to_csv(index=False), "heads.csv")
        client.set_terminated(run.info.run_id)
    new = tmp_path / "moved" / "study"
    shutil.copytree(old, new)
    shutil.rmtree(old)
    proc = commands.run([sys.executable, "-m", "emergence.common", "relocate", str(new / "mlflow.db"),
                           "--from", str(old)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "relocated 4 artifact location(s)" in proc.stdout  # 1 experiment + 3 runs
    results = read_mlflow(f"sqlite:///{new}/mlflow.db", "emergence")
    assert results.heads is not None and len(results.heads) == 6
    assert sorted(results.heads["revision"].unique()) == ["r0", "r1", "r2"]


def test_throughput_settings_are_not_part_of_a_runs_identity():
    """batch_size and memory_gb change how a pass is cut, not its results: same identity."""
    from hydra import compose, initialize_config_dir

    from emergence.catalog import CONF_DIR
    from emergence.revisions import Revision
    from emergence.tracking import config_hash

    rev = Revision(tokens=1000, step=10, name="step10")
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        base = compose("config")
        same = compose("config", overrides=["corpus.batch_size=7", "screen.memory_gb=2"])
        other = compose("config", overrides=["corpus.n_sequences=7"])
    assert config_hash(base, rev) == config_hash(same, rev)
    assert config_hash(base, rev) != config_hash(other, rev)
