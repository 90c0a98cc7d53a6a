"""Shared fixtures; the tiny models themselves live in ``tiny_models.py``."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("MLFLOW_ENABLE_ASYNC_LOGGING", "false")

from tiny_models import FAMILIES  # noqa: E402


@pytest.fixture(params=FAMILIES)
def family(request):
    return request.param


@pytest.fixture(scope="session")
def toy_cache(tmp_path_factory):
    """One toy checkpoint cache for the whole session: the slow tests that need a trained
    toy model share it, so each recipe is trained at most once per test run."""
    return tmp_path_factory.mktemp("toy_cache")
