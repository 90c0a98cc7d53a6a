"""MLflow as a researcher lands on it (issue 24, point 7), on a real SQLite store.

After ``python -m emergence`` (tiny local checkpoints, no training): the experiment carries
the tags the MLflow UI reads (emergence/common/mlflow_ui.py: kind, primary metric, the saved view
of the curves against tokens, in the form the UI parses); the job's parent run holds every
screen run (``mlflow.parentRunId``), the curves ``fraction.<class>.<model>`` at step =
tokens with the screen runs' values, and its figures; a rerun that finds every run finished adds
no run, and a partial rerun's parent has the curves of the revisions done before. A ``-m``
sweep's parent gets the figures too. What the UI then shows is checked in headless Chromium by scripts/check_mlflow_ui.py (docs/checks.md).
"""

import json
import os
import commands
import sys
from pathlib import Path

import pytest

from tiny_models import save_revisions

ROOT = Path(__file__).resolve().parents[2]
CLASSES = ("induction", "previous_token", "duplicate_token", "bos", "self", "local")


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    return save_revisions(tmp_path_factory.mktemp("ckpt") / "tiny", "gpt_neox", steps=(10, 100, 1000))


def emergence(*args, store: Path, cwd: Path):
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1")
    cmd = [sys.executable, "-m", "emergence", *args, f"tracking.uri=sqlite:///{store}/mlflow.db", "stats=false"]
    proc = commands.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout + proc.stderr


def local_model(folder):
    return ["model=pythia_70m", "model.name=tiny_neox", f"model.path={folder}", "model.repo=null",
            "model.revisions=folder", "corpus.n_sequences=32", "corpus.batch_size=32", "corpus.segment_length=12"]


def runs_of(client, exp, kind):
    return [r for r in client.search_runs([exp.experiment_id]) if r.data.tags.get("emergence.kind") == kind]


def history(client, run_id, key):
    return {m.step: m.value for m in client.get_metric_history(run_id, key)}


def assert_figures(client, run_id, tmp_path):
    import matplotlib.image

    paths = {a.path for a in client.list_artifacts(run_id, "curves")}
    assert {"curves/fractions.png", "curves/curves.csv"} | {f"curves/fraction.{c}.png" for c in CLASSES} <= paths
    local = Path(client.download_artifacts(run_id, "curves", str(tmp_path)))
    image = matplotlib.image.imread(local / "fraction.bos.png")
    assert image.shape[0] > 300 and image.shape[1] > 500 and image.std() > 0.05  # drawn, not blank
    return local


def test_the_job_lands_in_mlflow_with_its_view_parent_run_curves_and_figures(checkpoints, tmp_path):
    import mlflow

    from emergence.common.mlflow_ui import VIEW_KEY, VIEW_NAME, VIEW_STAMP, VIEW_TAG

    store, work = tmp_path / "store", tmp_path / "work"
    work.mkdir()
    out = emergence(*local_model(checkpoints), store=store, cwd=work)
    client = mlflow.MlflowClient(f"sqlite:///{store}/mlflow.db")
    exp = client.get_experiment_by_name("emergence")

    # The experiment: a model-development one, fraction.bos charted first, the saved view as the UI parses it.
    assert exp.tags["mlflow.experimentKind"] == "custom_model_development"
    assert exp.tags["mlflow.experiment.primaryMetric.name"] == "fraction.bos"
    view = json.loads(exp.tags[VIEW_TAG])
    assert view["name"] == VIEW_NAME and view["createdAt"] == view["updatedAt"] == VIEW_STAMP
    state = json.loads(view["state"])
    assert state["groupBy"] == {"aggregateFunction": "average",
                                "groupByKeys": [{"mode": "tag", "groupByData": "emergence.model"}]}
    bos = next(c for c in state["compareRunCharts"] if c["metricKey"] == "fraction.bos")
    assert (bos["type"], bos["xAxisKey"], bos["xAxisScaleType"]) == ("LINE", "step", "log")
    assert {c["metricSectionId"] for c in state["compareRunCharts"]} == {s["uuid"] for s in state["compareRunSections"]}
    assert "metrics.`fraction.bos`" in state["selectedColumns"]
    # The printed way in: the runs table (the sidebar's switch on Model training) and the view on its charts.
    base = f"http://127.0.0.1:5000/#/experiments/{exp.experiment_id}/runs?"
    assert base + "viewStateShareKey=emergence-runs&workflowType=machine_learning" in out
    runs_view = json.loads(json.loads(exp.tags["mlflow.sharedViewState.emergence-runs"])["state"])
    assert runs_view["searchFilter"] == "tags.`emergence.kind` = 'screen'"  # the parent runs hidden
    assert runs_view["selectedColumns"][:3] == ["tags.`emergence.model`", "tags.`emergence.revision`", "metrics.`tokens`"]
    assert base + f"viewStateShareKey={VIEW_KEY}&compareRunsMode=CHART&workflowType=machine_learning" in out

    # The parent run holds the screens, their curves at step = tokens, and the figures.
    (parent,) = runs_of(client, exp, "sweep")
    screens = runs_of(client, exp, "screen")
    assert len(screens) == 3 and parent.info.status == "FINISHED"
    assert parent.info.run_name.startswith("job ") and "tiny_neox" in parent.info.run_name
    assert {r.data.tags["mlflow.parentRunId"] for r in screens} == {parent.info.run_id}
    tokens = {int(r.data.params["tokens"]): r for r in screens}
    assert sorted(tokens) == [10_000, 100_000, 1_000_000]
    for c in CLASSES:
        assert history(client, parent.info.run_id, f"fraction.{c}.tiny_neox") == {
            t: r.data.metrics[f"fraction.{c}"] for t, r in tokens.items()}, c
    loss = history(client, parent.info.run_id, "tiny_neox/induction_loss")
    assert loss == {t: r.data.metrics["induction_loss"] for t, r in tokens.items()} and len(set(loss.values())) == 3
    csv = assert_figures(client, parent.info.run_id, tmp_path / "dl1") / "curves.csv"
    assert sorted(int(line.split(",")[2]) for line in csv.read_text().splitlines()[1:]) == sorted(tokens)

    # A log without a terminal: a line per stage, no progress-bar redraws, no library INFO lines.
    assert "\r" not in out and not any(unit in out for unit in ("batch/s", "rev/s", "step/s", "it/s"))
    assert " INFO " not in out and "tiny_neox@step100: screened (2/3" in out

    # The same job again: every run is finished, nothing is screened and no run is added.
    again = emergence(*local_model(checkpoints), store=store, cwd=work)
    assert again.count("(done before)") == 3  # the table
    assert "3 of 3 revision(s) finished before and skipped" in again
    assert len(runs_of(client, exp, "screen")) == 3
    assert [r.info.run_id for r in runs_of(client, exp, "sweep")] == [parent.info.run_id]
    assert len(client.search_runs([exp.experiment_id])) == 4


def test_a_partly_screened_job_gets_a_parent_with_the_curves_of_every_revision(checkpoints, tmp_path):
    """One revision screened before: the rerun of all three opens a parent run whose curves hold the
    revision done before too."""
    import mlflow

    store, work = tmp_path / "store", tmp_path / "work"
    work.mkdir()
    emergence(*local_model(checkpoints), "revision=named", "revision.name=step100", store=store, cwd=work)
    out = emergence(*local_model(checkpoints), store=store, cwd=work)
    assert "1 of 3 revision(s) finished before and skipped" in out
    client = mlflow.MlflowClient(f"sqlite:///{store}/mlflow.db")
    exp = client.get_experiment_by_name("emergence")
    newest = max(runs_of(client, exp, "sweep"), key=lambda r: r.info.start_time)
    assert newest.info.status == "FINISHED" and len(runs_of(client, exp, "sweep")) == 2
    assert sorted(history(client, newest.info.run_id, "fraction.bos.tiny_neox")) == [10_000, 100_000, 1_000_000]
    assert_figures(client, newest.info.run_id, tmp_path / "dl2")


def test_a_sweep_parent_gets_the_figures(checkpoints, tmp_path):
    import mlflow

    store = tmp_path / "store"
    emergence("-m", *local_model(checkpoints), "revision=logspaced", "revision.k=2",
              f"hydra.sweep.dir={tmp_path}/sweep", store=store, cwd=ROOT)
    client = mlflow.MlflowClient(f"sqlite:///{store}/mlflow.db")
    exp = client.get_experiment_by_name("emergence")
    (parent,) = runs_of(client, exp, "sweep")
    assert parent.info.run_name.startswith("sweep ") and parent.data.tags["emergence.sweep"] == f"{tmp_path}/sweep"
    assert sorted(history(client, parent.info.run_id, "fraction.bos.tiny_neox")) == [10_000, 1_000_000]
    assert_figures(client, parent.info.run_id, tmp_path / "dl")


def test_a_sweep_over_two_models_opens_one_parent_per_model_tagged_with_it(checkpoints, tmp_path):
    """The UI's view groups runs by the model tag: a parent over two models would be an empty
    "Unassigned" legend entry, so each model's jobs get their own parent, tagged with the model,
    holding that model's screen runs, curves and figures."""
    import mlflow

    store = tmp_path / "store"
    args = [a if not a.startswith("model.name=") else "model.name=tiny_a,tiny_b" for a in local_model(checkpoints)]
    emergence("-m", *args, "revision=logspaced", "revision.k=2", f"hydra.sweep.dir={tmp_path}/sweep", store=store, cwd=ROOT)
    client = mlflow.MlflowClient(f"sqlite:///{store}/mlflow.db")
    exp = client.get_experiment_by_name("emergence")
    parents = {p.data.tags["emergence.model"]: p for p in runs_of(client, exp, "sweep")}
    assert sorted(parents) == ["tiny_a", "tiny_b"]
    for model, parent in parents.items():
        assert parent.info.run_name.endswith(f": {model} (2 jobs)") and parent.info.status == "FINISHED"
        children = [r for r in runs_of(client, exp, "screen") if r.data.tags["mlflow.parentRunId"] == parent.info.run_id]
        assert len(children) == 2 and {r.data.tags["emergence.model"] for r in children} == {model}
        assert sorted(history(client, parent.info.run_id, f"fraction.bos.{model}")) == [10_000, 1_000_000]
        local = assert_figures(client, parent.info.run_id, tmp_path / f"dl_{model}")
        assert model in (local / "curves.csv").read_text() and ({"tiny_a", "tiny_b"} - {model}).pop() not in \
            (local / "curves.csv").read_text()  # its own model's curves


def test_an_experiment_made_before_gets_the_tags_and_keeps_a_view_saved_over_in_the_ui(tmp_path):
    import mlflow

    from emergence.common.mlflow_ui import VIEW_TAG, view_tag_value
    from emergence.common.store import prepare_store

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client = mlflow.MlflowClient(uri)
    bare = client.create_experiment("old")
    assert prepare_store(uri, "old") == bare
    tags = client.get_experiment(bare).tags
    assert tags["mlflow.experimentKind"] == "custom_model_development" and tags[VIEW_TAG] == view_tag_value()
    # An older form of the tool's own view is rewritten; one the user saved over (updatedAt changed) is kept.
    older = json.loads(view_tag_value())
    client.set_experiment_tag(bare, VIEW_TAG, json.dumps(dict(older, state="{}")))
    prepare_store(uri, "old")
    assert client.get_experiment(bare).tags[VIEW_TAG] == view_tag_value()
    users = json.dumps(dict(older, state="{}", updatedAt=older["updatedAt"] + 1))
    client.set_experiment_tag(bare, VIEW_TAG, users)
    client.set_experiment_tag(bare, "mlflow.experiment.primaryMetric.name", "count.induction")
    prepare_store(uri, "old")
    tags = client.get_experiment(bare).tags
    assert tags[VIEW_TAG] == users and tags["mlflow.experiment.primaryMetric.name"] == "count.induction"


def test_the_statistics_experiment_is_a_model_development_one(tmp_path):
    import mlflow

    from stats.report import log_to_mlflow

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "report.md").write_text("# report\n")
    mlflow.MlflowClient(uri).create_experiment("emergence_stats")  # made before, without the tag
    log_to_mlflow(tmp_path / "out", {"curves": [], "gaps": []}, uri, None, "emergence_stats")
    exp = mlflow.MlflowClient(uri).get_experiment_by_name("emergence_stats")
    assert exp.tags["mlflow.experimentKind"] == "custom_model_development"
