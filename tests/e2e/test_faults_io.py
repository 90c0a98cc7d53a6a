"""Faults of the disk and of a tracking server (issue 34, points 4 and 5), made real: small tmpfs
mounts (a full disk, a read-only folder: this runs as root, where a chmod would not stop a
write; skipped where mounting is not allowed), a real ``mlflow server`` stopped with SIGSTOP.

- a full artifact disk at the end of a job: exit 1 in one line, the parent run FAILED, no empty
  figure left (it used to exit 0 with a 0-byte figure and the parent RUNNING);
- a disk that fills during toy training: one line naming the file and ``cache.toy_dir``, no
  partial checkpoint left (it used to be ``torch.save``'s RuntimeError traceback);
- a read-only run folder, output folder or toy cache, ``EMERGENCE_HOME`` naming a file: one line
  naming the folder and the setting, exit 2, before any work;
- a tracking server that stops answering: the sweep fails within ``tracking.timeout_s`` of it
  (plus the sweep's own ending), says how to resume, and the rerun resumes.
"""

from __future__ import annotations

import os
import signal
import commands
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from sweeps import ROOT, all_runs, command, env, local_model, parents, screens
from servers import mlflow_server
from test_faults_store import REVISIONS, checkpoints  # noqa: F401  (fixture)


@contextmanager
def tmpfs(folder: Path, size: str, read_only: bool = False):
    """A tmpfs of ``size`` mounted at ``folder`` (read-only with ``read_only``); skips the test where
    mounting is not allowed (not root, no CAP_SYS_ADMIN)."""
    folder.mkdir(parents=True, exist_ok=True)
    options = f"size={size}" + (",ro" if read_only else "")
    mounted = commands.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield folder
    finally:
        commands.run(["umount", "-l", str(folder)], check=False)


def run_emergence(*args, extra_env=None, timeout=600):
    return commands.run(command(*args), cwd=ROOT, env={**env(), **(extra_env or {})}, capture_output=True,
                          text=True, timeout=timeout)


def error_lines(stderr: str):
    return [line for line in stderr.splitlines() if line.startswith("error:")]


# --- point 4: a write that fails fails the job, leaving nothing RUNNING and nothing empty ---------

def test_a_full_artifact_disk_fails_the_job_and_leaves_no_empty_figure(checkpoints, tmp_path):  # noqa: F811
    """The screens' artifacts (a few KB) fit on the 100 KB disk, the parent run's figures (about
    260 KB) do not: the job exits 1 with one line, its parent run is FAILED with the cause, the
    screen runs stay whole, and no empty or partial figure is left."""
    with tmpfs(tmp_path / "disk", "100k") as disk:
        proc = run_emergence(*local_model(checkpoints), "revision=all", f"tracking.uri=sqlite:///{tmp_path}/mlflow.db",
                             f"tracking.artifacts={disk}", f"hydra.run.dir={tmp_path}/run")
        assert proc.returncode == 1, proc.stderr[-3000:]
        assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
        (line,) = error_lines(proc.stderr)
        assert "cannot write to the MLflow store" in line and "No space left on device" in line, line
        files = [f for f in disk.rglob("*") if f.is_file()]
        assert not [f for f in files if f.stat().st_size == 0 or f.suffix == ".png"], files
        assert {f.name for f in files} == {"heads.csv", "config.yaml"}
    runs = all_runs(f"sqlite:///{tmp_path}/mlflow.db", "emergence")
    (parent,) = parents(runs)
    assert parent.info.status == "FAILED" and "No space left on device" in parent.data.tags["emergence.error"]
    shots = screens(runs)
    assert len(shots) == len(REVISIONS) and {r.info.status for r in shots} == {"FINISHED"}


def test_a_disk_that_fills_during_toy_training_leaves_no_partial_checkpoint(tmp_path):
    from emergence import OutputError
    from emergence.toy.train import train_suite
    from test_toy_train import fast_recipe

    with tmpfs(tmp_path / "toy", "600k") as disk:
        with pytest.raises(OutputError) as caught:
            train_suite(fast_recipe(), disk / "suite", progress=False)
        message = str(caught.value)
        assert "\n" not in message and "(cache.toy_dir)" in message and str(disk / "suite") in message, message
        assert not list(disk.rglob(".tmp-*")), list(disk.rglob("*"))
        assert not (disk / "suite" / "revisions.json").exists()  # not taken for a finished suite


# --- point 5: folders that cannot be written, found before any work --------------------------------

@pytest.mark.parametrize("setting", ["hydra.run.dir", "cache.toy_dir", "EMERGENCE_HOME", "stats output_dir"])
def test_an_unwritable_folder_is_one_line_before_any_work(setting, tmp_path):
    with tmpfs(tmp_path / "ro", "1m", read_only=True) as ro:
        if setting == "stats output_dir":
            proc = commands.run([sys.executable, "-m", "stats", "source=xu2026", f"output_dir={ro}/out"], cwd=ROOT,
                                  env=env(), capture_output=True, text=True, timeout=300)
            expected = "(output_dir)"
        elif setting == "EMERGENCE_HOME":
            (tmp_path / "a_file").write_text("")
            proc = run_emergence("dry_run=true", extra_env={"EMERGENCE_HOME": str(tmp_path / "a_file")})
            expected = "is a file, not a folder"
        else:
            proc = run_emergence(f"{setting}={ro}/x", "model=toy_neox", "recipe@model.recipe=fast_neox",
                                 f"tracking.uri=sqlite:///{tmp_path}/mlflow.db",
                                 *([] if setting == "hydra.run.dir" else [f"hydra.run.dir={tmp_path}/run"]))
            expected = f"({setting})"
    assert proc.returncode == 2, proc.stderr[-2000:]
    (line,) = [line for line in proc.stderr.splitlines() if "error:" in line]
    assert expected in line and ("Read-only file system" in line or "is a file" in line), line
    assert not (tmp_path / "mlflow.db").exists()  # nothing was started


# --- point 4: a tracking server that stops answering ---------------------------------------------

@pytest.mark.slow
def test_a_server_that_stops_answering_stops_the_sweep_within_the_bound(checkpoints, tmp_path):  # noqa: F811
    """SIGSTOP of the server once the sweep's parent run exists (the server then accepts connections
    and never answers, as a hung one does): the sweep ends within tracking.timeout_s (20 s) plus
    its own ending, exit 1, with one line saying how to resume; its later jobs do not wait again.
    The server continued, the same command resumes and every revision ends with one run."""
    (tmp_path / "server").mkdir()
    with mlflow_server(tmp_path / "server") as (server, url):
        args = ["-m", *local_model(checkpoints), "revision=all", "tracking=server", f"tracking.uri={url}",
                "tracking.experiment=hang", "tracking.timeout_s=20"]
        sweep = subprocess.Popen(command(*args), cwd=ROOT, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True)
        deadline = time.time() + 300
        while not (_has_experiment(url, "hang") and parents(all_runs(url, "hang"))):
            assert time.time() < deadline and sweep.poll() is None, "the sweep never opened its parent run"
            time.sleep(0.2)
        os.killpg(server.pid, signal.SIGSTOP)
        stopped = time.time()
        out, err = sweep.communicate(timeout=300)
        took = time.time() - stopped
        os.killpg(server.pid, signal.SIGCONT)
        assert sweep.returncode == 1, err[-3000:]
        assert "Traceback" not in err, err[-3000:]
        last = error_lines(err)[-1]
        assert "the sweep stopped after" in last and "run the same command to resume" in last, err[-2000:]
        assert "the server does not answer" in last, last
        assert took < 20 + 45, f"the sweep took {took:.0f} s after the server stopped answering"
        again = commands.run(command(*args), cwd=ROOT, env=env(), capture_output=True, text=True, timeout=600)
        assert again.returncode == 0, again.stderr[-3000:]
        shots = screens(all_runs(url, "hang"))
        assert sorted(r.data.tags["emergence.revision"] for r in shots) == sorted(REVISIONS)
        assert {r.info.status for r in shots} == {"FINISHED"}
        assert "RUNNING" not in {p.info.status for p in parents(all_runs(url, "hang"))}


def _has_experiment(url: str, name: str) -> bool:
    import mlflow

    return mlflow.MlflowClient(url).get_experiment_by_name(name) is not None
