"""A real ``mlflow server`` for the tests that need one, and a free port (emergence.ui's): one copy of each.

The ``server`` fixture (tests/conftest.py) starts one for a test module; a test that stops or
freezes its server (tests/e2e/test_faults_io.py) starts its own with :func:`mlflow_server`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from store_template import new_store

from emergence.ui import free_port


@contextmanager
def mlflow_server(folder: Path):
    """A real ``mlflow server`` on 127.0.0.1 (SQLite backend, a new store copied from the tests'
    template (tests/store_template.py), and served artifacts in ``folder``, no telemetry):
    ``(process, url)`` once it answers; stopped afterwards (resumed if stopped, SIGTERM, SIGKILL
    after 3 s)."""
    import urllib.request

    new_store(folder / "server.db")
    port = free_port()
    cmd = [str(Path(sys.executable).with_name("mlflow")), "server", "--host", "127.0.0.1", "--port", str(port),
           "--workers", "1", "--backend-store-uri", f"sqlite:///{folder}/server.db",
           "--artifacts-destination", str(folder / "artifacts"), "--serve-artifacts"]
    log = open(folder / "server.log", "w")
    proc = subprocess.Popen(cmd, cwd=folder, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                            env=dict(os.environ, MLFLOW_DISABLE_TELEMETRY="true"))
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 180
    while True:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2):
                break
        except OSError:
            pass
        if proc.poll() is not None or time.time() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            raise AssertionError(f"mlflow server did not start:\n{(folder / 'server.log').read_text()[-3000:]}")
        time.sleep(0.3)
    try:
        yield proc, url
    finally:
        os.killpg(proc.pid, signal.SIGCONT)
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=3)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()
