"""revision=refine end to end on a local registry whose induction circuit switches at a known revision."""

import os
import commands
import sys
from pathlib import Path

import pytest

import switching_revisions

ROOT = Path(__file__).resolve().parents[2]
SWITCH = 23  # the first switched-on revision: step23


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    return switching_revisions.build(tmp_path_factory.mktemp("switch") / "reg", n=40, switch_step=SWITCH)


@pytest.fixture
def switched():
    """The switched attention in this process, restored afterwards (it is process-wide)."""
    restore = switching_revisions.install()
    yield
    restore()


def overrides(folder, store, *extra):
    return ["model=pythia_70m", "model.name=switchy", f"model.path={folder}", "model.repo=null",
            "model.revisions=folder", "corpus.n_sequences=8", "corpus.batch_size=8", "corpus.segment_length=12",
            "revision=refine", "revision.k=4", "revision.refine.classes=[induction]",
            "revision.refine.per_round=1", "revision.refine.rounds=10", "stats=false",
            f"tracking.uri=sqlite:///{store}/mlflow.db", "tracking.experiment=refine", *extra]


def screened(store):
    import mlflow

    client = mlflow.MlflowClient(f"sqlite:///{store}/mlflow.db")
    exp = client.get_experiment_by_name("refine")
    return sorted(int(r.data.params["step"]) for r in client.search_runs([exp.experiment_id])
                  if r.data.tags.get("emergence.kind") != "sweep")


def test_refine_finds_the_switch_revision_and_a_second_call_adds_none(registry, tmp_path, capsys, switched):
    from emergence.job import run_job
    from emergence.catalog import compose

    store = tmp_path / "store"
    results = run_job(compose(overrides(registry, store)), progress=False)
    out = capsys.readouterr().out
    steps = screened(store)
    assert len(steps) == len(set(steps))                      # never a revision twice
    assert {SWITCH - 1, SWITCH} <= set(steps)                 # the bracket is the two adjacent revisions
    assert len(steps) <= 4 + 6                                # start + about log2(bracket) rounds of one
    assert "refine round 1" in out and "| induction |" in out and "| yes |" in out
    counts = {r.revision.step: r.metrics["count.induction"] for r in results}
    assert counts[SWITCH - 1] == 0 and counts[SWITCH] == 2
    # The statistics see the denser curve and say the largest jump is between adjacent checkpoints.
    from stats.analysis import analyse_curve
    from stats.sources.mlflow import read_mlflow

    tracked = read_mlflow(f"sqlite:///{store}/mlflow.db", "refine", read_heads=False)
    analysis = analyse_curve(tracked.curve("switchy", "induction"), results=tracked)
    assert analysis.verdict.evidence["max_jump_revisions"] == [f"step{SWITCH - 1}", f"step{SWITCH}"]
    assert analysis.verdict.evidence["max_jump_between"] == 0
    assert tracked.known_between("switchy", "step1", "step40") == 38
    # A second call finds the bracket resolved and screens nothing.
    run_job(compose(overrides(registry, store)), progress=False)
    assert screened(store) == steps
    assert "0 revision(s) added in 0 round(s)" in capsys.readouterr().out


def test_dry_run_prints_the_first_rounds_plan(registry, tmp_path, switched):
    from emergence.job import plan_jobs, run_job
    from emergence.catalog import compose

    store = tmp_path / "store"
    start = plan_jobs(compose(overrides(registry, store, "dry_run=true")))
    assert [j.revision.step for j in start] == [1, 3, 12, 40]  # no store yet: the 4 log-spaced start revisions
    assert not (store / "mlflow.db").exists()                 # a dry run creates no store
    run_job(compose(overrides(registry, store, "revision=logspaced")), progress=False)
    first = plan_jobs(compose(overrides(registry, store, "dry_run=true")))
    assert len(first) == 1 and first[0].revision.step in range(11, 40)   # one inside the bracket


def test_multirun_with_joblib_gives_the_same_result(registry, tmp_path, switched):
    single, multi = tmp_path / "single", tmp_path / "multi"
    from emergence.job import run_job
    from emergence.catalog import compose

    run_job(compose(overrides(registry, single)), progress=False)
    env = dict(os.environ, HF_HUB_OFFLINE="1",
               PYTHONPATH=os.pathsep.join([str(switching_revisions.sitecustomize_dir(tmp_path / "site")),
                                           os.environ.get("PYTHONPATH", "")]))
    cmd = [sys.executable, "-m", "emergence", "-m", *overrides(registry, multi), "hydra/launcher=joblib",
           "hydra.launcher.n_jobs=2", f"hydra.sweep.dir={tmp_path}/sweep"]
    proc = commands.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "refine round 1" in proc.stdout and "| induction |" in proc.stdout
    assert screened(multi) == screened(single)


def test_the_report_says_whether_the_largest_jump_is_resolved(registry, tmp_path, switched):
    from emergence.job import run_job
    from emergence.catalog import compose
    from stats.analysis import analyse
    from stats.config import AnalysisConfig
    from stats.sources.mlflow import read_mlflow

    store = tmp_path / "store"
    run_job(compose(overrides(registry, store, "revision=logspaced", "revision.k=6")), progress=False)

    def between():
        tracked = read_mlflow(f"sqlite:///{store}/mlflow.db", "refine")
        cfg = AnalysisConfig(n_boot=20, progress=False)
        study = analyse(tracked, cfg)  # through the per-head re-thresholding, as the report goes
        return next(a for a in study.curves if a.head_class == "induction").to_dict()["max_jump_between"]

    assert between() == 20                           # step19 -> step40: 20 checkpoints inside
    run_job(compose(overrides(registry, store, "revision.k=6")), progress=False)
    assert between() == 0
