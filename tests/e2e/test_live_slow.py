"""Slow: the real toy recipe with ``live=adaptive`` (minutes of CPU training).

The issue's check: the largest jump of the induction count lies between two saved
checkpoints at most 0.03 decades of tokens apart, with at most 40 checkpoints in all; and
the saved bracket holds the jump the watch grid sees over every live screen.
"""

from __future__ import annotations

import json
import math
import os
import commands
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def test_the_adaptive_toy_brackets_the_induction_jump_within_003_decades_with_at_most_40_checkpoints(
        toy_cache, tmp_path):
    import mlflow

    from emergence.job import run_job
    from emergence.live.toy import live_suite_folder
    from emergence.refine_rule import find_bracket
    from emergence.catalog import compose
    from emergence.revisions import Revision

    cfg = compose(["model=toy_neox", "live=adaptive", "stats=false", f"cache.toy_dir={toy_cache}",
                   f"tracking.uri=sqlite:///{tmp_path}/mlflow.db"])
    results = run_job(cfg, progress=False)
    registry = json.loads((live_suite_folder(cfg) / "revisions.json").read_text())["revisions"]
    assert len(registry) <= 40 and [r.revision.name for r in results] == [r["name"] for r in registry]
    saved = {r.revision: r.metrics["count.induction"] for r in results}
    bracket = find_bracket(saved, "induction", sorted(saved))
    assert bracket is not None and bracket.k_hi - bracket.k_lo >= 2      # the circuit forms
    assert math.log10(bracket.hi.tokens / bracket.lo.tokens) <= 0.03
    client = mlflow.MlflowClient(cfg.tracking.uri)
    exp = client.get_experiment_by_name("emergence")
    every = {Revision(int(r.data.params["tokens"]), int(r.data.params["step"]), r.data.params["revision"]):
             r.data.metrics["count.induction"] for r in client.search_runs([exp.experiment_id], max_results=5000)}
    finest = find_bracket(every, "induction", sorted(every))
    assert bracket.lo.tokens <= finest.lo.tokens and finest.hi.tokens <= bracket.hi.tokens


def test_a_sweep_runs_one_live_job_per_model(tmp_path):
    """``-m model=...,... live=adaptive``: the sweeper does not expand revisions (known only after training)."""
    root = Path(__file__).resolve().parents[2]
    args = ["-m", "model=toy_neox", "recipe@model.recipe=fast_neox,neox", "live=adaptive", "live.first_step=5",
            "live.screens_per_decade=10", "stats=false", f"cache.toy_dir={tmp_path}/toy",
            f"tracking.uri=sqlite:///{tmp_path}/mlflow.db", f"hydra.sweep.dir={tmp_path}/sweep",
            "model.recipe.steps=40", "model.recipe.first_checkpoint=5", "model.recipe.n_checkpoints=4"]
    proc = commands.run([sys.executable, "-m", "emergence", *args], cwd=root, env=dict(os.environ, HF_HUB_OFFLINE="1"),
                          capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "revision.pin" not in proc.stdout + proc.stderr             # one job per model, not one per revision
    assert sorted(p.name for p in (tmp_path / "sweep").iterdir() if p.name.isdigit()) == ["0", "1"]
    assert len(list((tmp_path / "toy").glob("toy_neox-*-live-*"))) == 2
