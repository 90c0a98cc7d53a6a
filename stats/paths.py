"""Where ``stats`` finds its config tree and writes its outputs (a leaf: imports no module of ``stats``; the output home is
:mod:`emergence.common.paths`, shared with ``emergence``)."""

from __future__ import annotations

from pathlib import Path

from emergence.common.paths import PROJECT_ROOT, emergence_home  # noqa: F401  (shared with emergence)

#: The config tree holding ``stats.yaml`` and ``source/``: ``stats/conf`` in an installed
#: copy (the wheel ships them there), else the checkout's top-level ``conf/``.
CONF_DIR = Path(__file__).resolve().parent / "conf"
if not (CONF_DIR / "stats.yaml").is_file():
    CONF_DIR = PROJECT_ROOT / "conf"
