"""Shared fixtures; the tiny models themselves live in ``tiny_models.py``."""

from __future__ import annotations

import os
import signal

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("MLFLOW_ENABLE_ASYNC_LOGGING", "false")

# A test run started in the background by a non-interactive shell (`.ci/run &`) inherits SIGINT
# ignored, and so would the jobs the tests start: a Ctrl-C the tests send them (tests/test_interrupt.py,
# tests/test_team_store.py) would never arrive, and the interrupted run would finish. Jobs started
# from a terminal have the default disposition; give the test run's children that.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

from servers import mlflow_server  # noqa: E402
from tiny_models import FAMILIES  # noqa: E402


@pytest.fixture(params=FAMILIES)
def family(request):
    return request.param


@pytest.fixture(scope="session")
def toy_cache(tmp_path_factory):
    """One toy checkpoint cache for the whole session: the slow tests that need a trained
    toy model share it, so each recipe is trained at most once per test run."""
    return tmp_path_factory.mktemp("toy_cache")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A real ``mlflow server`` for the test module (tests/servers.py ``mlflow_server``: SQLite backend,
    served artifacts, no telemetry): ``(url, folder)``. The one server fixture of the suite."""
    folder = tmp_path_factory.mktemp("server")
    with mlflow_server(folder) as (_, url):
        yield url, folder
