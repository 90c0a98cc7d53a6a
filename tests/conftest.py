"""Shared fixtures and the tests' kinds; the tiny models themselves live in ``tiny_models.py``.

The folders mirror the packages: ``tests/emergence`` and ``tests/stats`` test one module's
behaviour each, ``tests/e2e`` runs the commands end to end, and ``tests/`` itself holds the
helpers and the repository-wide checks (architecture, lint). Each test has one kind (a marker,
pyproject.toml): ``cli`` for every test of ``tests/e2e`` and those marked so elsewhere, ``store``
for those marked so (a real MLflow store in the test process), ``unit`` for the rest; ``slow``
as well for the few that train a toy model (minutes). ``pytest -m unit`` is the quick loop.
"""

from __future__ import annotations

import os
import signal
import sys

import pytest

# Under pytest-xdist (``-n 2``) each worker shares the cores with the others: one BLAS / OpenMP
# thread each (set before numpy or torch is imported), so that the workers do not oversubscribe
# the machine. A command a test runs inherits it; a toy's training sets its own threads.
if os.environ.get("PYTEST_XDIST_WORKER"):
    for key in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(key, "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("MLFLOW_ENABLE_ASYNC_LOGGING", "false")

# A test run started in the background by a non-interactive shell (`.ci/run &`) inherits SIGINT
# ignored, and so would the jobs the tests start: a Ctrl-C the tests send them (tests/e2e/test_interrupt.py,
# tests/e2e/test_team_store.py) would never arrive, and the interrupted run would finish. Jobs started
# from a terminal have the default disposition; give the test run's children that.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

import store_template  # noqa: E402
from servers import mlflow_server  # noqa: E402
from tiny_models import FAMILIES  # noqa: E402


KINDS = ("unit", "store", "cli")


def pytest_runtest_setup(item):
    """Once MLflow is imported in this process, its new SQLite stores are copies of a migrated one
    (tests/store_template.py); the tests that never import it do not pay for importing it."""
    if "mlflow" in sys.modules and not store_template.installed():
        store_template.install()


def pytest_collection_modifyitems(config, items):
    """Give every test its kind (see the module notes)."""
    for item in items:
        if "e2e" in item.path.parts and not item.get_closest_marker("cli"):
            item.add_marker(pytest.mark.cli)
        if not any(item.get_closest_marker(kind) for kind in KINDS):
            item.add_marker(pytest.mark.unit)


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
