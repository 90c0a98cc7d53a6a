"""Slow: revision=refine on the toy suite after the default main job (issue 14).

The default job screens 10 of toy_neox's 65 checkpoints; refinement must then put the
induction transition between two adjacent checkpoints of the suite with at most 8 new
revisions, none screened twice, and a second call must add none.
"""

import os
import commands
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def emergence(*args, store, toy_cache):
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    cmd = [sys.executable, "-m", "emergence", "model=toy_neox", f"cache.toy_dir={toy_cache}", "stats=false",
           f"tracking.uri=sqlite:///{store}/mlflow.db", "tracking.experiment=toy_refine", *args]
    proc = commands.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=3000)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


def screened(store):
    import mlflow

    client = mlflow.MlflowClient(f"sqlite:///{store}/mlflow.db")
    exp = client.get_experiment_by_name("toy_refine")
    return [r.data.params["revision"] for r in client.search_runs([exp.experiment_id])
            if r.data.tags.get("emergence.kind") == "screen"]  # (each job's parent run is the other kind)


@pytest.mark.slow
def test_refine_resolves_the_toy_induction_transition(tmp_path, toy_cache):
    store = tmp_path / "store"
    emergence(store=store, toy_cache=toy_cache)
    before = screened(store)
    assert len(before) == 10
    out = emergence("revision=refine", store=store, toy_cache=toy_cache)
    after = screened(store)
    assert len(after) == len(set(after))                 # none twice
    assert 0 < len(after) - len(before) <= 8
    induction = next(line for line in out.splitlines() if line.startswith("| induction |"))
    assert induction.endswith("| yes |"), out
    again = emergence("revision=refine", store=store, toy_cache=toy_cache)
    assert screened(store) == after or sorted(screened(store)) == sorted(after)
    assert "0 revision(s) added in 0 round(s)" in again
