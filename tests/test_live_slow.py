"""Slow: the real toy recipe with ``live=adaptive`` (minutes of CPU training).

The issue's check: the largest jump of the induction count lies between two saved
checkpoints at most 0.03 decades of tokens apart, with at most 40 checkpoints in all; and
the saved bracket holds the jump the watch grid sees over every live screen.
"""

from __future__ import annotations

import json
import math

import pytest

pytestmark = pytest.mark.slow


def test_the_adaptive_toy_brackets_the_induction_jump_within_003_decades_with_at_most_40_checkpoints(
        toy_cache, tmp_path):
    import mlflow

    from emergence.job import run_job
    from emergence.live.toy import live_suite_folder
    from emergence.refine import find_bracket
    from emergence.registry import compose
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
