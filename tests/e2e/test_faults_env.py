"""The environment a job runs in (issue 23, points 5 and 8): MLflow's usage telemetry is off by
default, and a store that fills up mid-job is one line, exit 1, with nothing logged lost.

(The store checks made before any work, an unreachable or silent server, a bad scheme, a
read-only store folder, are bad-input cases in tests/e2e/test_validation.py.)"""

from __future__ import annotations

import json
import os
import shutil
import commands
import sys

import pytest

from sweeps import ROOT, local_model
from tiny_models import save_revisions

#: What MLflow reads as "a CI machine or a test" (mlflow/telemetry/utils.py): telemetry is off there
#: whatever the project does, so the check runs without them.
CI_MARKERS = ("PYTEST_CURRENT_TEST", "GITHUB_ACTIONS", "CI", "CIRCLECI", "GITLAB_CI", "JENKINS_URL", "TRAVIS", "TF_BUILD",
              "BITBUCKET_BUILD_NUMBER", "CODEBUILD_BUILD_ARN", "BUILDKITE", "TEAMCITY_VERSION", "CLOUD_RUN_EXECUTION",
              "RUNBOT_HOST_URL", "RUNBOT_BUILD_NAME", "RUNBOT_WORKER_ID", "DO_NOT_TRACK", "MLFLOW_DISABLE_TELEMETRY",
              "HF_HUB_DISABLE_TELEMETRY")
PROBE = """
import json, sys
import {module}
import mlflow, mlflow.telemetry.utils as u, os
from mlflow.telemetry import get_telemetry_client
print(json.dumps({{"client": get_telemetry_client() is not None, "ci": u._IS_IN_CI_ENV_OR_TESTING,
                  "hf": os.environ.get("HF_HUB_DISABLE_TELEMETRY")}}))
"""


def telemetry(module: str, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in CI_MARKERS}
    env.update(extra)
    proc = commands.run([sys.executable, "-c", PROBE.format(module=module)], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("module", ["emergence.tracking", "stats.__main__"])
def test_mlflow_telemetry_is_off_unless_asked_for(module):
    """What the jobs (emergence.tracking) and the statistics app write and read runs with: no
    telemetry client (MLflow 3 makes one at import and reports usage to an outside host), on a
    machine MLflow does not take for CI; an explicit MLFLOW_DISABLE_TELEMETRY=false gets it back."""
    assert telemetry(module) == {"client": False, "ci": False, "hf": "1"}
    if module == "emergence.tracking":
        assert telemetry(module, MLFLOW_DISABLE_TELEMETRY="false")["client"] is True


FULL_DISK = r"""
set -u
mount -t tmpfs -o size=6m tmpfs "$STORE" || exit 99
run() {{ "$PY" -m emergence {args} "hydra.run.dir=$OUT/run$1" "tracking.uri=sqlite:///$STORE/mlflow.db" "${{@:2}}" \
        >"$OUT/out$1" 2>"$OUT/err$1"; echo $? >"$OUT/rc$1"; }}
dump() {{ "$PY" -c 'import json, sys, mlflow
c = mlflow.MlflowClient(sys.argv[1]); e = c.get_experiment_by_name("emergence")
print(json.dumps([[r.data.tags.get("emergence.revision"), r.info.status, r.info.run_id] for r in c.search_runs([e.experiment_id])
                  if r.data.tags.get("emergence.kind") == "screen"]))' \
        "sqlite:///$STORE/mlflow.db" >"$OUT/runs$1"; }}
run 1 revision=named revision.name=step10
dd if=/dev/zero of="$STORE/fill" bs=64k 2>/dev/null
run 2 revision=all
rm "$STORE/fill"
dump 2
run 3 revision=all
dump 3
"""


@pytest.mark.slow
def test_a_store_that_fills_up_mid_job_is_one_line_and_loses_nothing(tmp_path):
    """A real full disk (a 6 MB tmpfs holding the store, in a mount namespace): one revision is
    logged, the disk is filled, the next job fails at its first write with one error line naming
    the store and the cause (116 lines before), exit 1; the logged run is intact, and once there is
    room again the rerun screens the rest."""
    if not shutil.which("unshare"):
        pytest.skip("no unshare: a tmpfs cannot be mounted here")
    folder = save_revisions(tmp_path / "ckpt", "gpt_neox", steps=(10, 100, 1000))
    (tmp_path / "store").mkdir()
    (tmp_path / "out").mkdir()
    args = " ".join(f"'{a}'" for a in local_model(folder, n_sequences=20))
    env = dict(os.environ, STORE=str(tmp_path / "store"), OUT=str(tmp_path / "out"), PY=sys.executable,
               HF_HUB_OFFLINE="1")
    flags = ["-m"] if os.geteuid() == 0 else ["-r", "-m"]
    proc = commands.run(["unshare", *flags, "bash", "-c", FULL_DISK.format(args=args)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900)
    if proc.returncode == 99 or not (tmp_path / "out" / "rc1").exists():
        pytest.skip(f"cannot mount a tmpfs in a mount namespace here: {proc.stderr[-300:]}")
    out = tmp_path / "out"
    assert (out / "rc1").read_text().strip() == "0", (out / "err1").read_text()[-3000:]
    err = (out / "err2").read_text()
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert (out / "rc2").read_text().strip() == "1" and len(errors) == 1, err[-3000:]
    assert errors[0].startswith(f"error: cannot write to the MLflow store {tmp_path / 'store' / 'mlflow.db'}: "), errors
    assert "disk is full" in errors[0] or "No space left" in errors[0] or "disk I/O error" in errors[0], errors
    assert "Traceback" not in err
    before = json.loads((out / "runs2").read_text())
    first = [r for r in before if r[0] == "step10"]
    assert [r[1] for r in first] == ["FINISHED"]
    assert (out / "rc3").read_text().strip() == "0", (out / "err3").read_text()[-3000:]
    after = json.loads((out / "runs3").read_text())
    finished = sorted(r[0] for r in after if r[1] == "FINISHED")
    assert finished == ["step10", "step100", "step1000"]
    assert [r[2] for r in after if r[0] == "step10"] == [first[0][2]]  # the logged run is the same run
