"""Helpers of the sweep/store/server tests: run ``python -m emergence`` as subprocesses on
tiny local checkpoint folders, and read a store back."""

from __future__ import annotations

import os
import commands
import subprocess
import sys
from pathlib import Path
from typing import List

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENT = "team"


def local_model(folder, n_sequences: int = 32) -> List[str]:
    return ["model=pythia_70m", "model.name=tiny_neox", f"model.path={folder}", "model.repo=null",
            "model.revisions=folder", f"corpus.n_sequences={n_sequences}", "corpus.batch_size=32",
            "corpus.segment_length=12", "stats=false"]


def store_args(uri: str) -> List[str]:
    return [f"tracking.uri={uri}", f"tracking.experiment={EXPERIMENT}"]


def command(*args) -> List[str]:
    return [sys.executable, "-m", "emergence", *args]


def env():
    return dict(os.environ, HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1", MLFLOW_ENABLE_ASYNC_LOGGING="false")


def start(*args, **kw) -> subprocess.Popen:
    return subprocess.Popen(command(*args), cwd=ROOT, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, **kw)


def run(*args, check: bool = True, timeout: int = 600) -> subprocess.CompletedProcess:
    proc = commands.run(command(*args), cwd=ROOT, env=env(), capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


def finish(proc: subprocess.Popen, timeout: int = 600):
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def all_runs(uri: str, experiment: str = EXPERIMENT, view: str = "active"):
    """Every run of the experiment (``view``: active, deleted or all). Under the store's lock,
    like every emergence process: a reader that opens a SQLite store while a job creates it
    would otherwise race it through MLflow's schema migration."""
    import mlflow
    from mlflow.entities import ViewType

    from emergence.common.store import retry, store_lock

    with store_lock(uri):
        client = mlflow.MlflowClient(uri)
        exp = retry(client.get_experiment_by_name, experiment)
        if exp is None:
            return []
        kind = {"active": ViewType.ACTIVE_ONLY, "deleted": ViewType.DELETED_ONLY, "all": ViewType.ALL}[view]
        return retry(client.search_runs, [exp.experiment_id], run_view_type=kind, max_results=1000)


def screens(runs):
    return [r for r in runs if r.data.tags.get("emergence.kind") == "screen"]


def parents(runs):
    return [r for r in runs if r.data.tags.get("emergence.kind") == "sweep"]
