"""A store that holds under a team (issue 13, point 0): concurrent sweeps into one new SQLite
store, the same sweep twice at once, a killed job and its rerun, the claim rules, retries."""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import time
from collections import Counter

import pytest
from omegaconf import OmegaConf

from sweeps import EXPERIMENT, all_runs, finish, local_model, parents, run, screens, start, store_args
from tiny_models import save_revisions


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    return save_revisions(tmp_path_factory.mktemp("ckpt") / "tiny", "gpt_neox", steps=(10, 100, 1000))


def test_concurrent_sweeps_into_a_new_store_screen_each_revision_once(checkpoints, tmp_path):
    """Two different sweeps and a copy of one of them, all started at once on a store that does
    not exist yet: no migration race, no experiment race, every (revision, screen) once."""
    uri = f"sqlite:///{tmp_path}/store/mlflow.db"
    base = [*local_model(checkpoints), "revision=all", *store_args(uri)]
    procs = [start("-m", *base, "screen=bos"), start("-m", *base, "screen=induction"),
             start("-m", *base, "screen=bos")]
    outcomes = [finish(p) for p in procs]
    for rc, out, err in outcomes:
        assert rc == 0, f"{out[-2000:]}\n{err[-3000:]}"
    runs = all_runs(uri)
    shots = screens(runs)
    pairs = Counter((r.data.tags["emergence.revision"], r.data.tags["emergence.screen"]) for r in shots)
    assert pairs == {(rev, s): 1 for rev in ("step10", "step100", "step1000") for s in ("bos", "induction")}
    assert all(r.info.status == "FINISHED" and r.data.tags["emergence.status"] == "complete" for r in shots)
    assert len(parents(runs)) == 3 and all(p.info.status == "FINISHED" for p in parents(runs))
    # Every screen run names its sweep's parent.
    assert {r.data.tags["mlflow.parentRunId"] for r in shots} <= {p.info.run_id for p in parents(runs)}
    # The duplicate sweep found the other's runs claimed or done, and said so.
    bos_out = outcomes[0][2] + outcomes[0][1] + outcomes[2][2] + outcomes[2][1]
    assert "claimed by another job" in bos_out or "done before" in bos_out
    # The store opens afterwards, with no migration leftovers, and opens on its runs in the UI.
    db = tmp_path / "store" / "mlflow.db"
    with sqlite3.connect(db) as con:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert not any(t.startswith("_alembic_tmp_") for t in tables)
    import mlflow

    exp = mlflow.MlflowClient(uri).get_experiment_by_name(EXPERIMENT)
    assert exp.tags["mlflow.experimentKind"] == "custom_model_development"
    r = shots[0]
    assert r.data.metrics["screen_seconds"] > 0
    history = mlflow.MlflowClient(uri).get_metric_history(r.info.run_id, "tokens")
    assert [m.step for m in history] == [int(r.data.params["tokens"])]  # metrics are logged against tokens
    assert r.data.metrics["train_step"] == float(r.data.params["step"])


def test_a_killed_job_leaves_one_finished_run_after_its_rerun(checkpoints, tmp_path):
    """SIGKILL while the run is claimed and being screened, then Ctrl-C, then a clean rerun:
    exactly one FINISHED run of that revision, and no orphan left visible. 16384 sequences keep
    the screen going about 3 s, a margin for the Ctrl-C to land in (256 took 0.12 s)."""
    uri = f"sqlite:///{tmp_path}/store/mlflow.db"
    args = [*local_model(checkpoints, n_sequences=16384), "revision=named", "revision.name=step100",
            *store_args(uri), "report=false"]

    def start_and_wait_for_claim(seen=()):
        proc = start(*args)
        deadline = time.time() + 240
        while time.time() < deadline:
            running = [r for r in screens(all_runs(uri)) if r.info.status == "RUNNING" and r.info.run_id not in seen]
            if running and "screen_seconds" not in running[0].data.metrics:
                return proc
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.1)
        proc.kill()
        raise AssertionError("the job never claimed its run")

    proc = start_and_wait_for_claim()
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    (orphan,) = screens(all_runs(uri))
    assert orphan.info.status == "RUNNING"  # left behind by the killed process

    proc = start_and_wait_for_claim({orphan.info.run_id})  # Ctrl-C: the run is marked KILLED
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=120)
    (killed,) = screens(all_runs(uri))
    assert killed.info.status == "KILLED" and "KeyboardInterrupt" in killed.data.tags["emergence.error"]

    run(*args)
    (done,) = screens(all_runs(uri))
    assert done.info.status == "FINISHED" and done.data.tags["emergence.status"] == "complete"
    assert {r.info.run_id for r in screens(all_runs(uri, view="deleted"))} == {orphan.info.run_id,
                                                                               killed.info.run_id}


# --- the claim rules, in process ---------------------------------------------------------------

def tracker(tmp_path, **extra):
    from emergence.tracking import Tracker

    cfg = OmegaConf.create({"uri": f"sqlite:///{tmp_path}/mlflow.db", "artifacts": None, "experiment": "claims",
                            "parent_run": None, "heartbeat_s": 60.0, "stale_after_s": 600.0,
                            "claim_settle_s": 0.0, **extra})
    return Tracker(cfg)


def dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_claim_rules(tmp_path):
    from emergence import tracking as t

    tr = tracker(tmp_path)
    mine, why = tr.claim("aaa", "m@r:all", {})
    assert mine and why == ""
    # A live claim (this very process) holds the identity: a second claim is refused.
    again, why = tr.claim("aaa", "m@r:all", {})
    assert again is None and "claimed by another job" in why
    # A claim whose process is gone on this host is dead: deleted and claimed anew.
    tr.client.set_tag(mine, t.PID_TAG, str(dead_pid()))
    fresh, _ = tr.claim("aaa", "m@r:all", {})
    assert fresh and fresh != mine
    assert tr.client.get_run(mine).info.lifecycle_stage == "deleted"
    # A claim from another host whose heartbeat is stale is dead too; a fresh one is alive.
    tr.client.set_tag(fresh, t.HOST_TAG, "elsewhere")
    assert tr.claim("aaa", "m@r:all", {})[0] is None
    tr.client.set_tag(fresh, t.HEARTBEAT_TAG, f"{time.time() - 3600:.3f}")
    third, _ = tr.claim("aaa", "m@r:all", {})
    assert third and tr.client.get_run(fresh).info.lifecycle_stage == "deleted"
    # A FAILED run of the identity is cleaned on the next claim; a complete one is skipped.
    tr.fail(third, ValueError("boom"))
    assert tr.client.get_run(third).data.tags[t.ERROR_TAG] == "ValueError: boom"
    fourth, _ = tr.claim("aaa", "m@r:all", {})
    assert tr.client.get_run(third).info.lifecycle_stage == "deleted"
    import pandas as pd

    tr.complete(fourth, params={"a": "1"}, metrics={"x": 1.0}, heads=pd.DataFrame({"h": [1]}), config_yaml="a: 1",
                step=123)
    none, why = tr.claim("aaa", "m@r:all", {})
    assert none is None and why.startswith("done before")
    assert tr.finished_run("aaa").info.run_id == fourth


def test_heartbeat_refreshes_the_claim(tmp_path):
    from emergence import tracking as t

    tr = tracker(tmp_path, heartbeat_s=0.2)
    run_id, _ = tr.claim("hb", "m@r:all", {})
    first = float(tr.client.get_run(run_id).data.tags[t.HEARTBEAT_TAG])
    with tr.heartbeat(run_id):
        time.sleep(1.0)
    assert float(tr.client.get_run(run_id).data.tags[t.HEARTBEAT_TAG]) > first


def test_writes_retry_on_a_locked_database():
    from emergence.common.store import retry

    calls = []

    def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise RuntimeError("(sqlite3.OperationalError) database is locked")
        return "ok"

    assert retry(flaky) == "ok" and len(calls) == 3
    with pytest.raises(ValueError):
        retry(lambda: (_ for _ in ()).throw(ValueError("other")))


def test_a_store_held_open_by_another_writer_still_takes_writes(tmp_path):
    """A second connection holding SQLite's write lock for a while: the job's writes wait and retry."""
    tr = tracker(tmp_path)
    con = sqlite3.connect(tmp_path / "mlflow.db", timeout=1, isolation_level=None, check_same_thread=False)
    con.execute("BEGIN EXCLUSIVE")
    import threading

    threading.Timer(6.0, lambda: con.execute("COMMIT")).start()
    tic = time.time()
    run_id, _ = tr.claim("locked", "m@r:all", {})
    assert run_id and time.time() - tic >= 5.0
    con.close()


def test_prepare_store_repairs_an_interrupted_migration(tmp_path):
    from emergence.common.store import prepare_store

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    prepare_store(uri, "one")
    with sqlite3.connect(tmp_path / "mlflow.db") as con:  # what a migration race left behind
        con.execute("CREATE TABLE _alembic_tmp_experiments (x INTEGER)")
    prepare_store(uri, "two")
    with sqlite3.connect(tmp_path / "mlflow.db") as con:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert "_alembic_tmp_experiments" not in tables
    assert os.path.exists(f"{tmp_path}/mlflow.db.lock")
    assert socket.gethostname()


def test_stats_runs_are_named_after_what_they_analysed(tmp_path):
    import mlflow

    from stats.report import log_to_mlflow

    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "report.md").write_text("# report\n")
    summary = {"curves": [{"model": m, "class": c, "shape": "sharp"} for m in ("toy_olmo", "toy_neox")
                          for c in ("induction", "bos")], "gaps": []}
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    rid = log_to_mlflow(tmp_path / "out", summary, uri, None, "named", {"source.experiment": "emergence"})
    run = mlflow.MlflowClient(uri).get_run(rid)
    assert run.info.run_name == "stats: toy_neox, toy_olmo (bos, induction) from emergence"
    assert run.data.tags["stats.models"] == "toy_neox,toy_olmo"


def test_stats_runs_log_the_curves_of_seed_runs_and_probes_under_valid_keys(tmp_path):
    """Curve names carry a qualifier in brackets (``toy_neox [seed 0]``, ``pythia_1b [xu2026]``),
    which MLflow refuses in a metric or tag key: they are logged as ``toy_neox:seed 0``."""
    import mlflow

    from stats.report import log_to_mlflow, metric_key

    assert metric_key("toy_neox [seed 0].induction") == "toy_neox:seed 0.induction"
    assert metric_key("m [probe=a,b]") == "m:probe_a_b"
    (tmp_path / "out").mkdir()
    summary = {"curves": [{"model": "toy_neox [seed 0]", "class": "bos", "shape": "none", "t50": 2.5e6,
                           "max_jump_share": 0.6, "censored": "right"}],
               "gaps": [{"model": "toy_neox [seed 0]", "definition": "fitted", "ratio": 2.0, "p_value": 0.01,
                         "bound": "lower"}],
               "pooled_gaps": [{"model": "toy_neox", "ratio": 1.5, "p_value": 0.2, "tau2": 0.0, "i2": 0.0}]}
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    run = mlflow.MlflowClient(uri).get_run(log_to_mlflow(tmp_path / "out", summary, uri, None, "seeds"))
    assert run.data.metrics["t50.toy_neox:seed 0.bos"] == 2.5e6
    assert run.data.metrics["gap_ratio.toy_neox:seed 0"] == 2.0
    assert run.data.tags["censored.toy_neox:seed 0.bos"] == "right"
    assert run.data.metrics["pooled_gap_ratio.toy_neox"] == 1.5
