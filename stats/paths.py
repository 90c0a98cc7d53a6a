"""Where ``stats`` finds its config tree and writes its outputs (a leaf: imports no module of ``stats``)."""

from __future__ import annotations

import os
from pathlib import Path

#: The folder that holds the packages (the checkout, or ``site-packages`` when installed);
#: same definition as emergence.
PROJECT_ROOT = Path(__file__).resolve().parents[1]
#: The config tree holding ``stats.yaml`` and ``source/``: ``stats/conf`` in an installed
#: copy (the wheel ships them there), else the checkout's top-level ``conf/``.
CONF_DIR = Path(__file__).resolve().parent / "conf"
if not (CONF_DIR / "stats.yaml").is_file():
    CONF_DIR = PROJECT_ROOT / "conf"


def emergence_home() -> Path:
    """Where ``outputs/`` goes: ``$EMERGENCE_HOME`` when set, else the current working directory."""
    home = os.environ.get("EMERGENCE_HOME")
    return Path(home).expanduser().resolve() if home else Path.cwd().resolve()
