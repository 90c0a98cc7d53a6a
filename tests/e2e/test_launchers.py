"""Launchers (issue 13, point 1): joblib workers and submitit jobs into one SQLite store, one
parent run per sweep, the summary built from returns that come back from other processes, a
failing job recorded FAILED while the others finish, and the sweep's exit status."""

from __future__ import annotations

import shutil

import pytest

from sweeps import all_runs, local_model, parents, run, screens, store_args
from tiny_models import save_revisions


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    return save_revisions(tmp_path_factory.mktemp("ckpt") / "tiny", "gpt_neox", steps=(10, 100, 1000, 10000))


@pytest.fixture(scope="module")
def broken(tmp_path_factory, checkpoints):
    """The same four revisions with step100's weights corrupted: its job raises while loading."""
    folder = tmp_path_factory.mktemp("broken") / "tiny"
    shutil.copytree(checkpoints, folder)
    for weights in (folder / "step100").glob("*.safetensors"):
        weights.write_bytes(b"not a safetensors file")
    return folder


def test_a_failing_job_is_recorded_and_the_sweep_goes_on(broken, tmp_path):
    """joblib, 2 workers: the broken revision's run is FAILED with its error, the three others
    FINISHED, the parent FAILED; the summary (from the workers' returns) lists the three and
    names the failed job; the sweep exits 1."""
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    proc = run("-m", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", *local_model(broken), "revision=all",
               *store_args(uri), check=False)
    assert proc.returncode == 1, proc.stderr[-3000:]
    runs = all_runs(uri)
    status = {r.data.tags["emergence.revision"]: r.info.status for r in screens(runs)}
    assert status == {"step10": "FINISHED", "step100": "FAILED", "step1000": "FINISHED", "step10000": "FINISHED"}
    (failed,) = [r for r in screens(runs) if r.info.status == "FAILED"]
    assert failed.data.tags["emergence.error"]
    (parent,) = parents(runs)
    assert parent.info.status == "FAILED" and parent.data.tags["emergence.failed_jobs"] == "1"
    assert {r.data.tags["mlflow.parentRunId"] for r in screens(runs)} == {parent.info.run_id}
    assert "=== sweep summary ===" in proc.stdout
    for rev in ("step10 ", "step1000 ", "step10000 "):
        assert rev in proc.stdout
    assert "1 of 4 job(s) failed" in proc.stdout and "revision.pin=step100" in proc.stdout
    last = [line for line in proc.stderr.splitlines() if line.strip()][-1]
    assert last.startswith("error: 1 of 4 job(s) failed: #") and "revision.pin=step100" in last


def test_bad_input_in_a_sweep_stops_it_before_any_job(checkpoints, tmp_path):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    proc = run("-m", *local_model(checkpoints), "revision=all", "screen.thresholds.bos=-5", *store_args(uri),
               check=False)
    assert proc.returncode == 2
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert lines[-1].startswith("error: screen.thresholds.bos=-5.0 must be a finite number > 0")
    assert "Launching" not in proc.stdout + proc.stderr and all_runs(uri) == []


def test_submitit_slurm_composes_with_the_schema_and_the_sweeper(checkpoints, tmp_path):
    """The structured-config clash of Hydra 1.3 with the submitit plugin does not bite: the
    slurm launcher composes with emergence_schema and the revision sweeper, takes the keys a
    user sets, and gets as far as submitting (no srun on this machine)."""
    keys = ["hydra/launcher=submitit_slurm", "hydra.launcher.partition=gpu", "hydra.launcher.gpus_per_node=1",
            "hydra.launcher.timeout_min=240", "hydra.launcher.mem_gb=64", "hydra.launcher.array_parallelism=4",
            "hydra.launcher.setup=[module load cuda]"]
    shown = run(*keys, *local_model(checkpoints), "--cfg", "hydra").stdout
    for line in ("partition: gpu", "gpus_per_node: 1", "timeout_min: 240", "mem_gb: 64", "array_parallelism: 4",
                 "- module load cuda", "RevisionSweeper"):
        assert line in shown, line
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    proc = run("-m", *keys, *local_model(checkpoints), "revision=final", *store_args(uri), check=False)
    assert proc.returncode == 1
    assert "not a subclass" not in proc.stderr
    assert 'Could not detect "srun"' in proc.stderr
    (parent,) = parents(all_runs(uri))
    assert parent.info.status == "FAILED"


@pytest.mark.slow
def test_submitit_local_and_joblib_sweeps_into_one_store(checkpoints, tmp_path):
    """A 4-job sweep through submitit_local and one through joblib (2 workers) into one SQLite
    store: exactly the expected runs, one parent each, none failed, summaries printed."""
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    sub = run("-m", "hydra/launcher=submitit_local", *local_model(checkpoints), "revision=all", "screen=bos",
              *store_args(uri))
    job = run("-m", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", *local_model(checkpoints), "revision=all",
              "screen=induction", *store_args(uri))
    for proc in (sub, job):
        assert "=== sweep summary ===" in proc.stdout and "step10000" in proc.stdout
    runs = all_runs(uri)
    assert len(runs) == 10
    ps = parents(runs)
    assert len(ps) == 2 and all(p.info.status == "FINISHED" for p in ps)
    for screen in ("bos", "induction"):
        mine = [r for r in screens(runs) if r.data.tags["emergence.screen"] == screen]
        assert sorted(r.data.tags["emergence.revision"] for r in mine) == ["step10", "step100", "step1000",
                                                                          "step10000"]
        assert all(r.info.status == "FINISHED" for r in mine)
        assert len({r.data.tags["mlflow.parentRunId"] for r in mine}) == 1
