"""``python -m emergence model=toy_neox live=adaptive``: the command, its dry run, a rerun, bad input."""

from __future__ import annotations

import json
import os
import commands
import sys
from pathlib import Path

import pytest

from emergence import EmergenceError
from emergence.catalog import compose

ROOT = Path(__file__).resolve().parents[2]
FAST = ["model=toy_neox", "recipe@model.recipe=fast_neox", "live=adaptive", "live.first_step=5",
        "live.screens_per_decade=10", "stats=false"]


def where(tmp_path):
    return [f"cache.toy_dir={tmp_path}/toy", f"tracking.uri=sqlite:///{tmp_path}/mlflow.db",
            f"hydra.run.dir={tmp_path}/hydra"]


def test_the_command_trains_with_live_screening_and_reports_every_saved_checkpoint(tmp_path):
    from emergence.console import format_plan
    from emergence.job import plan_jobs, run_job
    from emergence.live.toy import live_suite_folder

    args = FAST + where(tmp_path)
    before = plan_jobs(compose(args[:-1] + ["dry_run=true"]))
    assert before == [] and not (tmp_path / "mlflow.db").exists()          # nothing known (or made) before training
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    proc = commands.run([sys.executable, "-m", "emergence", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    folder = live_suite_folder(compose(args[:-1]))
    names = [r["name"] for r in json.loads((folder / "revisions.json").read_text())["revisions"]]
    table = proc.stdout.split("When circuits form")[0]
    assert all(f"  {n} " in table for n in names) and "(done before)" not in table  # screened during training
    assert names[0] == "step0" and names[-1] == "step40"
    planned = plan_jobs(compose(args[:-1] + ["dry_run=true"]))
    assert [j.revision.name for j in planned] == names and "local" in format_plan(planned)
    again = run_job(compose(args[:-1]), progress=False)                     # trained: nothing trained or screened
    assert [r.revision.name for r in again] == names and all(r.skipped for r in again)


@pytest.mark.parametrize("argv,message", [
    (["live=bogus"], "unknown live 'bogus'; valid: adaptive, off"),
    (["live=adaptive", "live.dense_every=0"], "live.dense_every=0"),
    (["live=adaptive", "live.classes=[nope]"], "nope"),
])
def test_bad_live_settings_are_refused_in_one_line(argv, message):
    from emergence.__main__ import precheck

    with pytest.raises(EmergenceError) as err:
        precheck(argv)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_live_adaptive_refuses_a_model_it_cannot_train_and_a_sweep_before_any_work(tmp_path):
    from emergence.job import run_job

    with pytest.raises(EmergenceError, match="live=adaptive trains a toy model"):
        run_job(compose(["model=pythia_70m", "live=adaptive"] + where(tmp_path)[:2]), progress=False)
    with pytest.raises(EmergenceError, match="revision.pin=step0 cannot be set with live=adaptive"):
        run_job(compose(FAST + where(tmp_path)[:2] + ["revision.pin=step0"]), progress=False)
    assert not (tmp_path / "toy").exists() and not (tmp_path / "mlflow.db").exists()
