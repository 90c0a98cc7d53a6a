"""Ctrl-C (issue 31, point 2): a sweep stopped by SIGINT ends in one line saying what finished and
how to resume, exit status 130, no traceback, and its parent run is not left RUNNING; the rerun
resumes without redoing the finished revisions; a third run, with every job finished, adds no run."""

from __future__ import annotations

import signal
import time

import pytest

from sweeps import all_runs, finish, local_model, parents, run, screens, start, store_args
from tiny_models import save_revisions


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    return save_revisions(tmp_path_factory.mktemp("ckpt") / "tiny", "gpt_neox", steps=(10, 100, 1000))


# timing-dependent (a SIGINT sent into a running sweep): passed alone and in the full suite, failed once in a
# fresh clone's .ci/run, probably one started in the background, whose jobs inherited SIGINT ignored (now
# restored by tests/conftest.py; passed so started, 2026-12-06)
@pytest.mark.slow
def test_ctrl_c_in_a_sweep_is_one_line_and_the_parent_is_not_left_running(checkpoints, tmp_path):
    uri = f"sqlite:///{tmp_path}/store/mlflow.db"
    args = ["-m", *local_model(checkpoints, n_sequences=256), "revision=all", *store_args(uri),
            f"hydra.sweep.dir={tmp_path}/sweep"]
    proc = start(*args)
    deadline = time.time() + 300
    while time.time() < deadline:  # wait for the first revision finished and the next one claimed
        shots = screens(all_runs(uri))
        if any(r.info.status == "FINISHED" for r in shots) and any(r.info.status == "RUNNING" for r in shots):
            break
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.2)
    else:
        proc.kill()
        raise AssertionError("the sweep never got to its second revision")
    proc.send_signal(signal.SIGINT)
    rc, out, err = finish(proc, timeout=180)
    assert rc == 130, err[-3000:]
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err[-3000:]
    lines = [line for line in err.splitlines() if line.startswith("interrupted:")]
    assert len(lines) == 1 and "of 3 job(s) finished" in lines[0] and "run the same command again" in lines[0], err
    runs = all_runs(uri)
    assert [p.info.status for p in parents(runs)] == ["KILLED"]
    assert not [r for r in screens(runs) if r.info.status == "RUNNING"]
    finished = {r.data.tags["emergence.revision"] for r in screens(runs) if r.info.status == "FINISHED"}
    assert int(lines[0].split()[1]) == len(finished) >= 1

    again = run(*args)  # the rerun screens only what is left, and says how many it skipped
    assert f"{len(finished)} of 3 job(s) finished before and skipped" in again.stdout
    done = [r for r in screens(all_runs(uri)) if r.info.status == "FINISHED"]
    assert sorted(r.data.tags["emergence.revision"] for r in done) == ["step10", "step100", "step1000"]

    third = run(*args)  # every job finished: nothing screened, no parent run added
    assert "3 of 3 job(s) finished before and skipped" in third.stdout
    runs = all_runs(uri)
    assert len(parents(runs)) == 2  # the interrupted sweep's and the resuming one's
    assert len([r for r in screens(runs) if r.info.status == "FINISHED"]) == 3
