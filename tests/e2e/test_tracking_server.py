"""A team tracking server (issue 13, point 2): a real ``mlflow server`` on 127.0.0.1 (its
backend a temporary SQLite file, its artifacts in a temporary folder); a small sweep logs to
it over HTTP, the runs are read back with ``mlflow.search_runs``; a local study is copied in
with ``python -m emergence.transfer``."""

from __future__ import annotations

import commands
import sys

import pytest

from sweeps import EXPERIMENT, ROOT, all_runs, local_model, parents, run, screens, store_args
from tiny_models import save_revisions


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    return save_revisions(tmp_path_factory.mktemp("ckpt") / "tiny", "gpt_neox", steps=(10, 100))


def test_a_sweep_logs_to_a_tracking_server(server, checkpoints):
    url, folder = server
    proc = run("-m", *local_model(checkpoints), "revision=all", "tracking=server", *store_args(url))
    assert "=== sweep summary ===" in proc.stdout
    import mlflow

    mlflow.set_tracking_uri(url)
    df = mlflow.search_runs(experiment_names=[EXPERIMENT], filter_string="tags.`emergence.kind` = 'screen'")
    assert sorted(df["params.revision"]) == ["step10", "step100"]
    assert set(df["status"]) == {"FINISHED"} and df["metrics.screen_seconds"].gt(0).all()
    (parent,) = parents(all_runs(url))
    assert set(df["tags.mlflow.parentRunId"]) == {parent.info.run_id}
    # Artifacts went to the server's destination, and come back through it.
    run_id = df["run_id"].iloc[0]
    names = {a.path for a in mlflow.MlflowClient(url).list_artifacts(run_id)}
    assert {"heads.csv", "config.yaml"} <= names
    assert list((folder / "artifacts").rglob("heads.csv"))
    # The same sweep again adds nothing.
    run("-m", *local_model(checkpoints), "revision=all", "tracking=server", *store_args(url))
    assert len(screens(all_runs(url))) == 2


def test_a_local_store_is_copied_into_the_server(server, checkpoints, tmp_path):
    url, _ = server
    local = f"sqlite:///{tmp_path}/mlflow.db"
    run("-m", *local_model(checkpoints), "revision=all", "screen=bos", f"tracking.uri={local}",
        "tracking.experiment=moved")
    cmd = [sys.executable, "-m", "emergence.transfer", local, url, "--experiment", "moved"]
    first = commands.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "moved: 3 run(s) copied, 0 already there" in first.stdout
    again = commands.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert "moved: 0 run(s) copied, 3 already there" in again.stdout
    src, dst = all_runs(local, "moved"), all_runs(url, "moved")
    assert len(dst) == 3
    by_source = {r.data.tags["emergence.copied_from"]: r for r in dst}
    import mlflow

    client = mlflow.MlflowClient(url)
    for r in src:
        copy = by_source[r.info.run_id]
        assert copy.data.params == r.data.params and copy.data.metrics == r.data.metrics
        assert copy.info.status == r.info.status and copy.info.start_time == r.info.start_time
        assert copy.info.run_name == r.info.run_name
        if r.data.tags.get("emergence.kind") == "screen":
            history = client.get_metric_history(copy.info.run_id, "fraction.bos")
            assert [m.step for m in history] == [int(r.data.params["tokens"])]
            assert {a.path for a in client.list_artifacts(copy.info.run_id)} >= {"heads.csv", "config.yaml"}
            # the child names the parent's copy
            assert copy.data.tags["mlflow.parentRunId"] == by_source[r.data.tags["mlflow.parentRunId"]].info.run_id
    bad = commands.run([sys.executable, "-m", "emergence.transfer", local, url, "--experiment", "nope"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and "no experiment 'nope'" in bad.stderr
