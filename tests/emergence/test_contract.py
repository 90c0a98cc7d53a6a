"""The run contract (emergence/common/), end to end: ``run_job`` screens a tiny model
into a temporary MLflow store and the stats reader reads it back by the contract's names.
Also: a ``screen=bos`` run after ``screen=all`` loses no curve, probes never mix in one
curve, and runs of one probe measured differently are refused."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from tiny_models import save_revisions
from emergence.common import contract as C
from emergence.common import head_classes

pytestmark = pytest.mark.store

STEPS = (10, 100)


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    return save_revisions(tmp_path_factory.mktemp("ckpt") / "tiny", "gpt_neox", steps=STEPS)


def job(checkpoints, store, *overrides):
    """Screen every revision of the tiny checkpoints into ``store`` (one run each)."""
    from emergence.job import run_job
    from emergence.catalog import compose

    cfg = compose(["model=pythia_70m", "model.name=tiny", f"model.path={checkpoints}", "model.repo=null",
                   "model.revisions=folder", "revision=all", "corpus.n_sequences=16", "corpus.batch_size=8",
                   "corpus.segment_length=8", f"tracking.uri={uri(store)}", f"tracking.artifacts={store}/art",
                   "tracking.experiment=contract", *overrides])
    return run_job(cfg, progress=False)


def uri(store):
    return f"sqlite:///{store}/mlflow.db"


def read(store, **kw):
    from stats.sources.mlflow import read_mlflow

    return read_mlflow(uri(store), "contract", **kw)


def test_a_screened_run_reads_back_by_the_contract(checkpoints, tmp_path):
    results = job(checkpoints, tmp_path, "screen=all")
    assert len(results) == len(STEPS)
    classes = head_classes.names()
    for r in results:  # every class is logged, whatever the screen reports
        for c in classes:
            for name in (C.count_metric(c), C.fraction_metric(c), C.mean_selectivity_metric(c),
                         C.layer_count_metric(0, c)):
                assert name in r.metrics, name
    got = read(tmp_path)
    assert got.models == ["tiny"]
    assert got.classes("tiny") == list(classes)
    for c in classes:
        curve = got.curve("tiny", c)
        assert list(curve.tokens) == [s * 1000 for s in STEPS]  # tokens from the revisions.json
        assert (curve.n == 16).all()  # 4 layers x 4 heads
        logged = [r.metrics[C.count_metric(c)] for r in sorted(results, key=lambda r: r.revision.tokens)]
        assert list(curve.k) == logged
    heads = got.heads
    expected = ({"model", "revision", "tokens", *C.HEAD_KEY_COLUMNS, C.PRIMARY_COLUMN, C.FIRST_TOKEN_COLUMN}
                | {C.selectivity_column(c) for c in classes} | {C.flag_column(c) for c in classes})
    assert expected <= set(heads.columns)
    assert len(heads) == 16 * len(STEPS)
    assert set(heads["tokens"]) == {float(s * 1000) for s in STEPS}
    assert {C.mean_selectivity_metric(c) for c in classes} <= set(got.continuous["metric"])
    # the params that make the run identity
    import mlflow

    run = mlflow.MlflowClient(uri(tmp_path)).get_run(results[0].run_id)
    params = run.data.params
    identity = C.RunIdentity.from_params(params)
    assert identity.model == "tiny" and identity.revision == results[0].revision.name
    assert identity.probe.startswith("synthetic_induction:")
    assert json.loads(params[C.LOGGED_CLASSES_PARAM]) == list(classes)
    assert json.loads(params[C.SCREEN_CLASSES_PARAM]) == list(classes)
    assert run.data.tags[C.STATUS_TAG] == C.STATUS_COMPLETE


def test_a_bos_screen_after_the_all_screen_keeps_every_curve(checkpoints, tmp_path):
    job(checkpoints, tmp_path, "screen=all")
    before = read(tmp_path).curves.sort_values(["class", "tokens"]).reset_index(drop=True)
    # A run from before every class was logged: only the bos columns and metrics.
    write_legacy_bos_runs(tmp_path)
    legacy = read(tmp_path)
    assert any("newest run that has it" in n for n in legacy.notes)
    pd.testing.assert_frame_equal(legacy.curves.sort_values(["class", "tokens"]).reset_index(drop=True), before)
    assert legacy.heads[C.selectivity_column("induction")].notna().all()  # from the older, all-class run
    # And a screen=bos run today (it reports bos only, but logs every class).
    (bos,) = job(checkpoints, tmp_path, "screen=bos", "revision=final")
    assert C.count_metric("induction") in bos.metrics
    after = read(tmp_path)
    assert set(after.classes("tiny")) == set(head_classes.names())
    pd.testing.assert_frame_equal(after.curves.sort_values(["class", "tokens"]).reset_index(drop=True), before)


def write_legacy_bos_runs(store):
    """Copy each complete run as a newer one holding only what a ``screen=bos`` run logged
    before: the bos metrics and the bos columns of heads.csv."""
    import mlflow
    from mlflow.entities import Metric, Param, RunTag

    client = mlflow.MlflowClient(uri(store))
    exp = client.get_experiment_by_name("contract")
    for old in client.search_runs([exp.experiment_id]):
        params = dict(old.data.params, **{C.SCREEN_NAME_PARAM: "bos", C.SCREEN_CLASSES_PARAM: '["bos"]'})
        params.pop(C.LOGGED_CLASSES_PARAM)
        metrics = {k: v for k, v in old.data.metrics.items()
                   if (C.parse_metric(k) is None or C.parse_metric(k).head_class == "bos")}
        run = client.create_run(exp.experiment_id)
        client.log_batch(run.info.run_id, params=[Param(k, v) for k, v in params.items()],
                         metrics=[Metric(k, v, 0, 0) for k, v in metrics.items()],
                         tags=[RunTag(C.STATUS_TAG, C.STATUS_COMPLETE)])
        heads = pd.read_csv(client.download_artifacts(old.info.run_id, C.HEADS_ARTIFACT, str(store)))
        keep = [*C.HEAD_KEY_COLUMNS, C.selectivity_column("bos"), C.flag_column("bos"), C.PRIMARY_COLUMN]
        client.log_text(run.info.run_id, heads[keep].to_csv(index=False), C.HEADS_ARTIFACT)
        client.set_terminated(run.info.run_id, "FINISHED")


def test_probes_never_mix_in_one_curve(checkpoints, tmp_path):
    job(checkpoints, tmp_path, "screen=all")
    job(checkpoints, tmp_path, "screen=all", "corpus.seed=1")
    got = read(tmp_path)
    assert len(got.models) == 2 and all(m.startswith("tiny [synthetic_induction:") for m in got.models)
    for model in got.models:
        assert len(got.curve(model, "bos")) == len(STEPS)
    assert any("kept apart" in n for n in got.notes)


def test_runs_of_one_probe_measured_differently_are_refused(checkpoints, tmp_path):
    from stats.errors import StatsError

    job(checkpoints, tmp_path, "screen=all")
    job(checkpoints, tmp_path, "screen=all", "screen.local_window=3")
    with pytest.raises(StatsError, match="different screen settings") as err:
        read(tmp_path)
    assert "screen.local_window=3" in str(err.value) and "screen.local_window=4" in str(err.value)
    assert "\n" not in str(err.value)


def test_metric_names_round_trip():
    for c in head_classes.names():
        assert C.parse_metric(C.count_metric(c)) == C.MetricName(C.COUNT, c)
        assert C.parse_metric(C.fraction_metric(c)) == C.MetricName(C.FRACTION, c)
        assert C.parse_metric(C.mean_selectivity_metric(c)) == C.MetricName(C.MEAN_SELECTIVITY, c)
        assert C.parse_metric(C.layer_count_metric(12, c)) == C.MetricName(C.LAYER_COUNT, c, 12)
        assert C.column_class(C.selectivity_column(c)) == c == C.column_class(C.flag_column(c))
    for other in (C.INDUCTION_LOSS_METRIC, C.N_HEADS_TOTAL_METRIC, C.PR_MEAN_METRIC, "count", "layer1.fraction.bos"):
        assert C.parse_metric(other) is None


def test_probe_key_ignores_throughput_and_names_the_kind():
    base = {"corpus.kind": "text_file", "corpus.path": "/a.txt", "corpus.seq_len": "64", "corpus.batch_size": "8"}
    assert C.probe_key(base) == C.probe_key(dict(base, **{"corpus.batch_size": "64"}))
    assert C.probe_key(base) != C.probe_key(dict(base, **{"corpus.path": "/b.txt"}))
    assert C.probe_kind(C.probe_key(base)) == "text_file"
    assert C.probe_key({}) == "unknown"


def test_the_contract_imports_no_model_code():
    import subprocess
    import sys

    code = ("import sys, emergence.common.contract, emergence.common.head_classes; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'transformers', 'stats')))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
