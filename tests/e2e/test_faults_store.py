"""Faults of a shared store (issue 23, points 1, 4, 6, 9), reproduced as they were found: a real
``mlflow server`` on 127.0.0.1 (one for the module), real sweeps as subprocesses, a real
``kill -9``; single jobs in this process on tiny real checkpoints.

- 1: three copies of one sweep at once against a server gave two FINISHED runs for one revision
  (the claim saw only RUNNING rivals, so one that finished a moment earlier was missed);
- 4: a single job stopped at the first corrupt checkpoint;
- 6: ``kill -9`` of a ``-m`` sweep left its parent run RUNNING for good, and cleaned orphans left
  their partial artifact folders;
- 9: a sweep whose revision another sweep held left it out of its summary.
"""

from __future__ import annotations

import os
import signal
import commands
import subprocess
import sys
import threading
import time
from collections import Counter

import pandas as pd
import pytest
from omegaconf import OmegaConf

from sweeps import ROOT, all_runs, command, env, local_model, parents, screens
from test_team_store import dead_pid
from tiny_models import save_revisions

REVISIONS = ("step10", "step100", "step1000")


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    return save_revisions(tmp_path_factory.mktemp("ckpt") / "tiny", "gpt_neox", steps=(10, 100, 1000))


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """One local SQLite store for the module's in-process tests (one experiment each): a new
    store costs its schema migration."""
    folder = tmp_path_factory.mktemp("store")
    return folder, f"sqlite:///{folder}/mlflow.db"


def tracker(uri: str, experiment: str, **extra):
    from emergence.tracking import Tracker

    return Tracker(OmegaConf.create({"uri": uri, "artifacts": None, "experiment": experiment, "parent_run": None,
                                     "heartbeat_s": 60.0, "stale_after_s": 600.0, "claim_settle_s": 0.0, **extra}))


def complete(tr, run_id: str) -> None:
    tr.complete(run_id, params={"a": "1"}, metrics={"x": 1.0}, heads=pd.DataFrame({"layer": [0], "head": [0]}),
                config_yaml="a: 1")


# --- point 1: a claim sees finished rivals, on every store kind ----------------------------------

@pytest.mark.slow
def test_three_copies_of_a_sweep_at_once_screen_each_revision_once(server, checkpoints):
    """The command of the report, on tiny checkpoints: three copies at once, one tracking server.
    Every revision has exactly one FINISHED run, and every copy's summary lists every revision
    (screened there, done before, or screened by another sweep). Slow (three processes at once, a
    minute on a loaded 2-core machine); the code before the fix gave a duplicate in about half the
    tries, the next test makes the race certain in seconds."""
    url, _ = server
    args = ["-m", *local_model(checkpoints, n_sequences=20), "revision=all", "tracking=server", f"tracking.uri={url}",
            "tracking.experiment=three_copies"]
    procs = [subprocess.Popen(command(*args), cwd=ROOT, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(3)]
    outcomes = [p.communicate(timeout=600) for p in procs]
    for proc, (out, err) in zip(procs, outcomes):
        assert proc.returncode == 0, f"{out[-2000:]}\n{err[-3000:]}"
    shots = screens(all_runs(url, "three_copies"))
    assert Counter(r.data.tags["emergence.revision"] for r in shots) == {name: 1 for name in REVISIONS}
    assert all(r.info.status == "FINISHED" and r.data.tags["emergence.status"] == "complete" for r in shots)
    assert [p.info.status for p in parents(all_runs(url, "three_copies"))] == ["FINISHED"] * 3
    for out, _ in outcomes:
        summary = out.split("=== sweep summary ===")[1]
        assert all(f"  {name} " in summary for name in REVISIONS), summary


def test_a_claim_loses_to_a_rival_that_finished_while_it_settled(server):
    """The race itself, made certain: a rival holds the claim and finishes while this job's claim
    waits out tracking.claim_settle_s; this job must not screen the revision again."""
    url, _ = server
    rival = tracker(url, "settle")
    mine = tracker(url, "settle", claim_settle_s=3.0)
    rival_id, _ = rival.claim("race", "m@r:all", {})
    out = {}
    thread = threading.Thread(target=lambda: out.update(claim=mine.claim("race", "m@r:all", {})))
    thread.start()
    deadline = time.time() + 30
    while len(rival._runs_of("race")) < 2 and time.time() < deadline:  # this job's claim is written
        time.sleep(0.05)
    complete(rival, rival_id)
    thread.join(timeout=60)
    run_id, why = out["claim"]
    assert run_id is None and why == f"done by another job (run {rival_id[:8]})"
    assert [r.info.run_id for r in rival._runs_of("race")] == [rival_id]  # the lost claim is gone


# --- point 6: kill -9 of a sweep, and orphans' artifacts -----------------------------------------

def test_kill_9_of_a_sweep_then_its_rerun_leaves_no_run_running(server, checkpoints, tmp_path):
    """SIGKILL of a ``-m`` sweep while a job screens: its parent run and the claim stay RUNNING
    (nothing can end them then); the rerun ends the dead parent KILLED, naming the process, deletes
    the orphan claim, screens every revision once and exits 0."""
    url, _ = server
    args = ["-m", *local_model(checkpoints, n_sequences=20), "revision=all", "tracking=server", f"tracking.uri={url}",
            "tracking.experiment=killed", "report=false"]  # (a claim on a server lives >= claim_settle_s: 1 s)
    log = open(tmp_path / "sweep.log", "w")
    proc = subprocess.Popen(command(*args), cwd=ROOT, env=env(), stdout=subprocess.DEVNULL, stderr=log)
    deadline = time.time() + 240
    while True:
        running = [r for r in screens(all_runs(url, "killed")) if r.info.status == "RUNNING"]
        if running:
            break
        assert proc.poll() is None and time.time() < deadline, (tmp_path / "sweep.log").read_text()[-3000:]
        time.sleep(0.1)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    log.close()
    (parent,) = parents(all_runs(url, "killed"))
    assert parent.info.status == "RUNNING"
    orphans = {r.info.run_id for r in screens(all_runs(url, "killed")) if r.info.status == "RUNNING"}
    assert orphans

    rerun = commands.run(command(*args), cwd=ROOT, env=env(), capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    runs = all_runs(url, "killed")
    old = next(p for p in parents(runs) if p.info.run_id == parent.info.run_id)
    assert old.info.status == "KILLED"
    assert f"pid {proc.pid}" in old.data.tags["emergence.error"] and "ended without closing" in old.data.tags["emergence.error"]
    assert [p.info.status for p in parents(runs) if p.info.run_id != parent.info.run_id] == ["FINISHED"]
    shots = screens(runs)
    assert Counter(r.data.tags["emergence.revision"] for r in shots) == {name: 1 for name in REVISIONS}
    assert all(r.info.status == "FINISHED" for r in shots)
    assert orphans <= {r.info.run_id for r in screens(all_runs(url, "killed", view="deleted"))}


@pytest.mark.parametrize("kind", ["sqlite", "server"])
def test_a_cleaned_orphan_takes_its_partial_artifacts_with_it(kind, server, store):
    """A claim killed while writing its artifacts (a partial heads.csv), then the identity claimed
    again: the orphan run is deleted and its artifact folder too, on a local store and on a server."""
    url, folder = server
    uri = store[1] if kind == "sqlite" else url
    tr = tracker(uri, f"orphans_{kind}")
    orphan, _ = tr.claim("partial", "m@r:all", {})
    tr.client.log_text(orphan, "layer,head,selectivity.bos\n0,0,", "heads.csv")  # cut off mid-write

    def left() -> list:
        root = store[0] / "mlartifacts" if kind == "sqlite" else folder / "artifacts"
        return [p for p in root.rglob("heads.csv") if orphan in p.parts]

    assert left()
    tr.client.set_tag(orphan, "emergence.claim.pid", str(dead_pid()))  # its process is gone
    fresh, why = tr.claim("partial", "m@r:all", {})
    assert fresh and fresh != orphan and why == ""
    assert tr.client.get_run(orphan).info.lifecycle_stage == "deleted"
    assert left() == []


# --- points 4 and 9: a single job in this process ------------------------------------------------

def run_job_here(monkeypatch, capsys, tmp_path, uri, experiment, *args):
    """``python -m emergence ARGS`` in this process; returns (exit status, stdout, stderr)."""
    from emergence.__main__ import cli as entry

    monkeypatch.setattr(sys, "argv", ["emergence", *args, f"hydra.run.dir={tmp_path}/run", f"tracking.uri={uri}",
                                      f"tracking.experiment={experiment}"])
    capsys.readouterr()
    code = 0
    try:
        entry()
    except SystemExit as exc:
        code = exc.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_a_single_job_goes_on_past_corrupt_checkpoints(checkpoints, store, tmp_path, monkeypatch, capsys):
    """The first revision's config.json truncated, the second's weights truncated: both runs FAILED
    with the cause, the third screened, exit 1 with one error line naming both; no traceback."""
    import shutil

    folder = tmp_path / "ckpt"
    shutil.copytree(checkpoints, folder)
    config = folder / "step10" / "config.json"
    config.write_text(config.read_text()[:40])
    weights = folder / "step100" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    code, out, err = run_job_here(monkeypatch, capsys, tmp_path, store[1], "corrupt", *local_model(folder, n_sequences=20),
                                  "revision=all")
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert code == 1 and len(errors) == 1, err[-3000:]
    assert errors[0].startswith("error: tiny_neox: 2 of 3 revision(s) failed: step10: RevisionFailed: cannot load the "
                                "checkpoint folder"), errors[0]
    assert "step100: RevisionFailed:" in errors[0] and "model.safetensors is truncated or corrupt" in errors[0]
    assert "Traceback" not in err
    assert "step1000" in out  # the table of what was screened
    runs = {r.data.tags["emergence.revision"]: r for r in screens(all_runs(store[1], "corrupt"))}
    assert {name: r.info.status for name, r in runs.items()} == {"step10": "FAILED", "step100": "FAILED",
                                                                  "step1000": "FINISHED"}
    assert "not a valid JSON" in runs["step10"].data.tags["emergence.error"]


def test_a_revision_another_sweep_holds_is_named_in_the_summary(checkpoints, store, tmp_path, monkeypatch, capsys):
    """Another sweep's job holds step100 (a live claim under its parent run): this job screens the
    other two, exits 0 and lists step100 as screened by another sweep, with its host and pid."""
    import socket

    from emergence.catalog import compose
    from emergence.revisions import Revision
    from emergence.tracking import config_hash

    uri = store[1]
    cfg = compose([*local_model(checkpoints, n_sequences=20), "revision=all", f"tracking.uri={uri}"])
    digest = config_hash(cfg, Revision(100_000, 100, "step100"))
    other = tracker(uri, "held", parent_run="0123456789abcdef")
    held, _ = other.claim(digest, "tiny_neox@step100:all", {"emergence.revision": "step100"})
    code, out, err = run_job_here(monkeypatch, capsys, tmp_path, uri, "held", *local_model(checkpoints, n_sequences=20),
                                  "revision=all")
    assert code == 0, err[-3000:]
    line = next(row for row in out.splitlines() if row.strip().startswith("step100 "))
    assert f"(screened by another sweep (host {socket.gethostname()}, pid {os.getpid()}))" in line, out
    assert held[:8] in line
    runs = {r.data.tags["emergence.revision"]: r.info.status for r in screens(all_runs(uri, "held"))}
    assert runs == {"step10": "FINISHED", "step100": "RUNNING", "step1000": "FINISHED"}

