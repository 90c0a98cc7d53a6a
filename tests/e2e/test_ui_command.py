"""``python -m emergence.ui`` (issue 31, point 5): one command starts the MLflow UI on the store the
last job used, prints its links and the latest report. A real ``mlflow ui`` process on 127.0.0.1,
waited for with a bound."""

import os
import socket
import commands
import sys
import time

import mlflow

from emergence.common.mlflow_ui import experiment_url
from servers import free_port

def test_ui_starts_on_the_last_jobs_store_and_prints_the_latest_report(tmp_path, monkeypatch):
    home = tmp_path / "home"
    store = f"sqlite:///{tmp_path / 'elsewhere' / 'study.db'}"  # not the default store: read from last_job.json
    (tmp_path / "elsewhere").mkdir()
    exp_id = mlflow.MlflowClient(store).create_experiment("my_study", artifact_location=str(tmp_path / "art"))
    monkeypatch.setenv("EMERGENCE_HOME", str(home))
    from emergence.ui import last_store, latest_report, remember_job

    remember_job(store, "my_study")
    assert last_store() == (store, "my_study")
    old, new = home / "outputs/stats/2026-01-01/10-00-00/report.md", home / "outputs/stats/2026-01-02/09-00-00/report.md"
    for path, title in ((old, "old"), (new, "new")):
        path.parent.mkdir(parents=True)
        path.write_text(f"# Emergence statistics report ({title})\n\n## By model\n")
    os.utime(old, (time.time() - 100, time.time() - 100))
    assert latest_report() == new
    port = free_port()
    env = {**os.environ, "EMERGENCE_HOME": str(home)}
    proc = commands.run([sys.executable, "-m", "emergence.ui", "--check", "--port", str(port), "--wait", "180"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert f"latest report: {new}" in out and "report (new)" in out and "(old)" not in out
    assert f"runs table: {experiment_url(store, exp_id, f'http://127.0.0.1:{port}')}" in out
    assert "viewStateShareKey=emergence-runs&workflowType=machine_learning" in out
    assert f"MLflow UI on {store}" in out
    _port_freed(port)  # --check stopped the UI it started


def _port_freed(port: int, wait: float = 20.0) -> None:
    """Bind ``port`` (no server listening on it) within ``wait`` seconds: the stopped UI's processes may
    take a moment to exit, and its closed connections linger in TIME_WAIT (SO_REUSEADDR allows those,
    not a listener)."""
    deadline = time.time() + wait
    while True:
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", port))
                s.listen()
                return
            except OSError:
                if time.time() > deadline:
                    raise
        time.sleep(0.2)


def test_a_ui_that_does_not_answer_in_time_is_one_error(tmp_path):
    env = {**os.environ, "EMERGENCE_HOME": str(tmp_path)}
    proc = commands.run([sys.executable, "-m", "emergence.ui", "--check", "--port", str(free_port()), "--wait", "0.01",
                           "--store", f"sqlite:///{tmp_path}/x.db"], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 1
    assert "error: mlflow ui did not answer on http://127.0.0.1:" in proc.stderr
    assert "no statistics report under" in proc.stdout

def test_the_ui_it_starts_opens_on_model_training(tmp_path, monkeypatch):
    """The UI the command serves (``mlflow server --app-name emergence``, a real process) is MLflow's,
    its page setting the sidebar's "Model training" switch where the browser has none (MLflow alone
    lands on its GenAI pages); the API answers as MLflow's."""
    import json
    import urllib.request

    from emergence.ui import start_ui, stop_ui
    from emergence.ui_app import SCRIPT, with_switch

    monkeypatch.setenv("EMERGENCE_HOME", str(tmp_path))
    proc, base = start_ui(f"sqlite:///{tmp_path}/study.db", free_port(), 180)
    try:
        page = urllib.request.urlopen(f"{base}/", timeout=30).read().decode()
        found = json.loads(urllib.request.urlopen(f"{base}/api/2.0/mlflow/experiments/search?max_results=5",
                                                  timeout=30).read())
    finally:
        stop_ui(proc)
    assert page.lower().startswith("<!doctype html>") and SCRIPT in page and "static-files/static/js/main." in page
    assert page.index(SCRIPT) < page.index("static-files/static/js/main.")  # before the UI's own scripts
    assert "localStorage.getItem('mlflow.workflowType_v1')" in SCRIPT  # a choice the browser made stands
    assert [e["name"] for e in found["experiments"]] == ["Default"]
    assert with_switch(b"<p>no head</p>") == b"<p>no head</p>"
