"""End to end: `python -m emergence` as a subprocess, into a temporary SQLite MLflow store."""

import os
import commands
import sys
from pathlib import Path

import pytest

from tiny_models import save_revisions

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    return save_revisions(tmp_path_factory.mktemp("ckpt") / "tiny", "gpt_neox", steps=(10, 100, 1000))


def run_cli(*args, store: Path, check=True):
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1")
    cmd = [sys.executable, "-m", "emergence", *args,
           f"tracking.uri=sqlite:///{store}/mlflow.db", f"tracking.artifacts={store}/artifacts",
           "tracking.experiment=e2e"]
    proc = commands.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    if check and proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


def local_model(folder):
    return ["model=pythia_70m", "model.name=tiny_neox", f"model.path={folder}", "model.repo=null",
            "model.revisions=folder", "corpus.n_sequences=64", "corpus.batch_size=32",
            "corpus.segment_length=12"]


def runs(store):
    import mlflow

    client = mlflow.MlflowClient(f"sqlite:///{store}/mlflow.db")
    exp = client.get_experiment_by_name("e2e")
    # the screens' runs (a -m sweep also opens a parent run, tagged emergence.kind = sweep)
    return [] if exp is None else [r for r in client.search_runs([exp.experiment_id])
                                   if r.data.tags.get("emergence.kind") != "sweep"]


def test_multirun_sweep_logs_one_run_per_revision_and_resumes(checkpoints, tmp_path):
    store = tmp_path / "store"
    # An "interrupted" sweep: only one revision got done.
    run_cli("-m", *local_model(checkpoints), "revision=named", "revision.name=step100", store=store)
    first = runs(store)
    assert len(first) == 1
    proc = run_cli("-m", *local_model(checkpoints), "revision=logspaced", "screen=all", store=store)
    assert "Launching 3 jobs" in proc.stdout + proc.stderr
    assert "=== sweep summary ===" in proc.stdout and "| tiny_neox |" in proc.stdout
    logged = runs(store)
    assert len(logged) == 3
    assert sorted(r.data.params["revision"] for r in logged) == ["step10", "step100", "step1000"]
    assert first[0].info.run_id in {r.info.run_id for r in logged}  # not redone
    for r in logged:
        assert r.info.status == "FINISHED"
        m = r.data.metrics
        for name in ("fraction.bos", "count.induction", "fraction.previous_token", "layer0.count.bos",
                     "layer3.count.induction", "mean_first_token_attention", "induction_loss",
                     "induction_accuracy"):
            assert name in m, name
        p = r.data.params
        assert p["model"] == "tiny_neox" and p["family"] == "gpt_neox"
        assert p["tokens"] == str(int(p["step"]) * 1000)
        assert p["pretraining_corpus"] == "the_pile" and "screen.thresholds.bos" in p
        assert len({x.data.tags["emergence.sweep"] for x in logged if x.info.run_id != first[0].info.run_id}) == 1
    import mlflow

    client = mlflow.MlflowClient(f"sqlite:///{store}/mlflow.db")
    names = {a.path for a in client.list_artifacts(logged[0].info.run_id)}
    assert {"heads.csv", "config.yaml"} <= names
    # The same sweep again adds nothing.
    again = run_cli("-m", *local_model(checkpoints), "revision=logspaced", "screen=all", store=store)
    assert len(runs(store)) == 3
    assert "done before" in again.stdout


def test_plain_run_prints_the_table_and_the_ui_command(checkpoints, tmp_path):
    store = tmp_path / "store"
    proc = run_cli(*local_model(checkpoints), "revision=final", "screen=bos", store=store)
    assert "BOS frac" in proc.stdout and "step1000" in proc.stdout
    assert f"mlflow ui --backend-store-uri sqlite:///{store}/mlflow.db" in proc.stdout
    (run,) = runs(store)
    # screen=bos reports bos only, but the run logs every class (emergence/common/)
    assert "fraction.bos" in run.data.metrics and "fraction.induction" in run.data.metrics
    assert run.data.params["screen.classes"] == '["bos"]'


@pytest.mark.parametrize("args, message", [
    (["model=pythia_7b"], "error: unknown model 'pythia_7b'; valid: crfm_gpt2, folder, olmo, olmo2_1b"),
    (["screen=sinks"], "error: unknown screen 'sinks'; valid: ablation, all, bos"),
    (["revision=named", "revision.name=step101"], "error: unknown revision 'step101' for model 'tiny_neox'; "
                                                  "nearest valid: step100, step10"),
    (["screen.thresholds.bos=-5"], "error: screen.thresholds.bos=-5.0 must be a finite number > 0"),
])
def test_bad_input_fails_in_one_line_and_writes_no_run(checkpoints, tmp_path, args, message):
    store = tmp_path / "store"
    proc = run_cli(*local_model(checkpoints), *args, store=store, check=False)
    assert proc.returncode == 2
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert lines[-1].startswith(message), proc.stderr
    assert "Traceback" not in proc.stderr
    assert runs(store) == []


def test_missing_local_folder_is_named(tmp_path):
    store = tmp_path / "store"
    proc = run_cli(*local_model(tmp_path / "nowhere"), store=store, check=False)
    assert proc.returncode == 2
    assert f"model.path='{tmp_path / 'nowhere'}' does not exist" in proc.stderr
    assert runs(store) == []


def test_text_file_corpus_with_the_model_tokenizer(tmp_path):
    """corpus=text_file tokenises a local file with the checkpoint's own tokenizer."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from emergence.job import run_job
    from emergence.catalog import compose

    text = tmp_path / "story.txt"
    words = "the cat sat on the mat and the dog sat on the log while the bird sang".split()
    text.write_text(" ".join(words * 60))
    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator([text.read_text()], trainers.WordLevelTrainer(special_tokens=["[BOS]", "[UNK]"]))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="[BOS]", unk_token="[UNK]")
    folder = save_revisions(tmp_path / "ckpt", "olmo", steps=(5,))
    fast.save_pretrained(folder / "step5")
    cfg = compose(["model=olmo", "model.name=texty", f"model.path={folder}", "model.repo=null",
                   "model.revisions=folder", "revision=final", "corpus=text_file", f"corpus.path={text}",
                   "corpus.seq_len=32", "corpus.n_sequences=20",
                   f"tracking.uri=sqlite:///{tmp_path}/mlflow.db", f"tracking.artifacts={tmp_path}/art"])
    (result,) = run_job(cfg, progress=False)
    assert result.metrics["induction_targets"] > 0  # repeated words give copy targets
    assert "fraction.induction" in result.metrics
    import mlflow

    run = mlflow.MlflowClient(f"sqlite:///{tmp_path}/mlflow.db").get_run(result.run_id)
    assert run.data.params["corpus.kind"] == "text_file"
    assert "windows=20" in run.data.params["probe"]


def test_a_job_opens_its_parent_run_without_writing_into_its_config(checkpoints, tmp_path):
    """In process, as emergence/__main__.py runs a job: the input checked once, the parent run opened,
    the revisions screened under it. The job's runs name the parent (``mlflow.parentRunId``) while
    ``cfg`` stays as composed: the parent run's id is handed to the job, not written into the config."""
    import mlflow
    from omegaconf import OmegaConf

    from emergence.job import run_job
    from emergence.parent_run import job_parent
    from emergence.preflight import validate
    from emergence.catalog import compose

    cfg = compose(local_model(checkpoints) + ["revision=all", f"tracking.uri=sqlite:///{tmp_path}/mlflow.db",
                                              f"tracking.artifacts={tmp_path}/art", "tracking.experiment=e2e"])
    before = OmegaConf.to_container(cfg)
    plan = validate(cfg)
    with job_parent(cfg, plan.revisions) as parent:
        parent.results = run_job(cfg, progress=False, plan=plan, parent_run=parent.run_id)
    assert OmegaConf.to_container(cfg) == before and cfg.tracking.parent_run is None
    assert parent.run_id and len(parent.results) == 3
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    assert {client.get_run(r.run_id).data.tags.get("mlflow.parentRunId") for r in parent.results} == {parent.run_id}
    assert client.get_run(parent.run_id).info.status == "FINISHED"
