"""The linter (ruff, configured in pyproject.toml: pycodestyle E/W and pyflakes F) finds nothing."""

import shutil
import commands
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PATHS = ["emergence", "stats", "tests", "benchmarks", "hydra_plugins", "scripts", "setup.py"]


def ruff() -> list:
    beside = Path(sys.executable).with_name("ruff")  # the venv's (the dev extra installs it)
    if beside.is_file():
        return [str(beside)]
    if shutil.which("ruff"):
        return [shutil.which("ruff")]
    pytest.fail("ruff is not installed: `pip install -e '.[dev]'` (scripts/setup.sh does it)")


def test_ruff_finds_nothing():
    proc = commands.run([*ruff(), "check", "--no-cache", "--output-format", "concise", *PATHS], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
