"""Issue 30: checkpoints of one's own and hub models without the hub.

- ``model.path=DIR`` alone screens under the folder's name (or ``model.name=``), tokens from
  ``revisions.json``; a selection that finds no revision says why (exit 2);
- offline (``HF_HUB_OFFLINE=1``, or ``HF_ENDPOINT`` at a closed port) a hub model stops at its
  first revision in one line, in seconds, with no FAILED run; the dry run says per revision
  whether it is cached or a download and that the hub did not answer;
- the CRFM GPT-2 seed suites and OLMo 2 plan offline (dry runs).
"""

from __future__ import annotations

import os
import socket
import commands
import sys
import time
from pathlib import Path

import pytest

from emergence import EmergenceError
from tiny_models import save_decoder

ROOT = Path(__file__).resolve().parents[2]


def cli(args, cwd, env=None, timeout=300):
    started = time.monotonic()
    proc = commands.run([sys.executable, "-m", "emergence", *args], cwd=cwd, env=env or dict(os.environ),
                          capture_output=True, text=True, timeout=timeout)
    return proc, time.monotonic() - started


@pytest.fixture(scope="module")
def gptj_folder(tmp_path_factory):
    return save_decoder(tmp_path_factory.mktemp("own") / "my_gptj_run", "gptj", steps=(0, 50, 100))


def test_model_path_alone_screens_under_the_folder_s_name(gptj_folder, tmp_path):
    proc, _ = cli([f"model.path={gptj_folder}", "revision=all", "dry_run=true"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [line.split() for line in proc.stdout.splitlines() if line.strip()[:1].isdigit()]
    assert [(r[1], r[2], r[4]) for r in rows] == [("my_gptj_run", "step0", "0"), ("my_gptj_run", "step50", "50,000"),
                                                  ("my_gptj_run", "step100", "100,000")]
    assert "toy_neox" not in proc.stdout


def test_model_path_alone_with_a_name_and_a_real_screen(gptj_folder, tmp_path):
    import mlflow

    proc, _ = cli([f"model.path={gptj_folder}", "model.name=mine", "revision=final", "corpus.n_sequences=16",
                   "corpus.segment_length=8", "stats=false", f"tracking.uri=sqlite:///{tmp_path}/m.db"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run,) = mlflow.MlflowClient(f"sqlite:///{tmp_path}/m.db").search_runs(
        [e.experiment_id for e in mlflow.MlflowClient(f"sqlite:///{tmp_path}/m.db").search_experiments()],
        "tags.`emergence.model` = 'mine' and tags.`emergence.kind` = 'screen'")  # not the job's parent run
    assert run.data.params["family"] == "gptj" and run.data.params["tokens"] == "100000"


def test_a_selection_that_finds_no_revision_says_why(tmp_path):
    from emergence.__main__ import folder_model
    from emergence.preflight import validate
    from emergence.catalog import compose

    folder = save_decoder(tmp_path / "steps_only", "gpt2", steps=(10, 20))
    (folder / "revisions.json").unlink()  # step<N>/ folders, no token counts
    cfg = compose(folder_model([f"model.path={folder}", f"tracking.uri=sqlite:///{tmp_path}/m.db"]))
    assert cfg.model.name == "steps_only" and cfg.model.revisions == "folder"
    with pytest.raises(EmergenceError, match=r"revision=logspaced .* all 2 revision\(s\) of 'steps_only' have 0 tokens "
                                             r".*set model.tokens.tokens_per_step"):
        validate(cfg)
    with pytest.raises(EmergenceError, match="model 'toy_neox' is a toy suite trained here"):
        validate(compose(folder_model(["model=toy_neox", f"model.path={folder}"])))


def test_a_revisions_json_naming_a_missing_folder_is_refused_before_any_work(tmp_path):
    """revisions.json lists a revision whose folder is gone: one line naming it, before anything loads
    (it used to surface only when that revision was screened)."""
    import shutil

    from emergence.__main__ import folder_model
    from emergence.preflight import validate
    from emergence.catalog import compose

    folder = save_decoder(tmp_path / "run", "gpt2", steps=(0, 10, 20))
    shutil.rmtree(folder / "step10")
    cfg = compose(folder_model([f"model.path={folder}", "revision=all", f"tracking.uri=sqlite:///{tmp_path}/m.db"]))
    with pytest.raises(EmergenceError, match=r"revisions.json lists 1 revision\(s\) without a checkpoint folder .*: "
                                             r"step10; add the folders"):
        validate(cfg)
    assert not (tmp_path / "m.db").exists()  # refused before the store was touched


# --- offline: one line, in seconds, no FAILED runs ----------------------------------------------

def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("how", ["HF_HUB_OFFLINE", "closed port"])
def test_a_hub_model_without_the_hub_stops_at_its_first_revision_in_one_line(tmp_path, how):
    import mlflow

    env = dict(os.environ, HF_HOME=str(tmp_path / "hf"), HF_HUB_OFFLINE="1")
    if how == "closed port":
        env.update(HF_HUB_OFFLINE="0", TRANSFORMERS_OFFLINE="0", HF_ENDPOINT=f"http://127.0.0.1:{closed_port()}")
    proc, seconds = cli(["model=olmoe", "screen=bos", "stats=false", f"tracking.uri=sqlite:///{tmp_path}/m.db"],
                        tmp_path, env)
    assert proc.returncode == 2, proc.stderr[-3000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    why = "HF_HUB_OFFLINE is set" if how == "HF_HUB_OFFLINE" else "did not answer"
    assert lines[0].startswith("error: allenai/OLMoE-1B-7B-0924 at revision 'step5000-tokens20B' is not in the local "
                               "HF cache") and why in lines[0] and "hf download" in lines[0], lines[0]
    assert seconds < 30, seconds
    if (tmp_path / "m.db").exists():
        client = mlflow.MlflowClient(f"sqlite:///{tmp_path}/m.db")
        assert not client.search_runs([e.experiment_id for e in client.search_experiments()])
    plan, _ = cli(["model=olmoe", "dry_run=true"], tmp_path, env)
    assert plan.returncode == 0, plan.stderr[-2000:]
    rows = [line for line in plan.stdout.splitlines() if "olmoe_1b_7b_0924" in line]
    assert len(rows) == 10 and all(row.endswith("download; hub unreachable") for row in rows), plan.stdout
    assert f"note: the hub is unreachable ({'HF_HUB_OFFLINE is set' if how == 'HF_HUB_OFFLINE' else ''}" in plan.stderr


# --- more suites, planned offline -----------------------------------------------------------------

@pytest.mark.parametrize("overrides, label, first, last, repo", [
    (["model=crfm_gpt2", "model.size=small", "model.seed=49"], "crfm_gpt2_small [seed 49]", "checkpoint-10",
     "checkpoint-400000", "stanford-crfm/battlestar-gpt2-small-x49"),
    (["model=crfm_gpt2", "model.size=medium", "model.seed=777"], "crfm_gpt2_medium [seed 777]", "checkpoint-10",
     "checkpoint-400000", "stanford-crfm/eowyn-gpt2-medium-x777"),
    (["model=olmo2_7b"], "olmo2_7b", "stage1-step1000-tokens5B", "stage1-step928646-tokens3896B", None),
    (["model=olmo2_1b"], "olmo2_1b", "stage1-step1000-tokens3B", "stage1-step1907359-tokens4001B", None),
])
def test_the_new_suites_plan_offline(tmp_path, overrides, label, first, last, repo):
    from emergence.planning import planned_jobs
    from emergence.catalog import compose, model_revisions

    cfg = compose([*overrides, "dry_run=true", f"tracking.uri=sqlite:///{tmp_path}/m.db"])
    jobs = planned_jobs(cfg)
    assert len(jobs) == 10 and {j.model for j in jobs} == {label}
    assert jobs[0].revision.name == first and jobs[-1].revision.name == last
    if repo:
        assert all(j.download.startswith(f"{repo}: ") for j in jobs)
    known = model_revisions(cfg.model)
    assert all(a.tokens <= b.tokens for a, b in zip(known, known[1:]))


def test_crfm_schedule_and_seeds_follow_the_training_configs():
    from emergence.sources import crfm_gpt2

    steps = crfm_gpt2.checkpoint_steps()
    assert len(steps) == 608 and steps[:3] == [10, 20, 30] and 150 in steps and 125 not in steps
    assert 2100 in steps and 2150 not in steps and 21000 in steps and 21100 not in steps
    with pytest.raises(EmergenceError, match=r"model.seed=50 is not a CRFM GPT-2 small run; valid: 21, 49, 81, 343, 777"):
        crfm_gpt2.repo_for("small", 50)


def test_olmo2_names_round_the_billions_up_as_the_hub_does():
    from emergence.sources.snapshot import derived_revisions

    names = {r.name for r in derived_revisions("olmo2_7b")}
    for listed in ("stage1-step928000-tokens3893B", "stage1-step925000-tokens3880B", "stage1-step913000-tokens3830B",
                   "stage1-step865000-tokens3629B", "stage1-step928646-tokens3896B"):  # branches the hub lists
        assert listed in names
    assert "stage1-step100000-tokens420B" not in names  # a step the hub lacks
