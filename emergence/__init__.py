"""emergence: when do attention circuits form during training?

Flow: config -> catalog -> model at revision -> probe -> screens -> tracking.

Where things are (the same rule in ``stats``):

- ``CONF_DIR``, the Hydra config tree: ``emergence/conf`` in an installed copy (the
  wheel ships the checkout's top-level ``conf/`` there), else ``<checkout>/conf``.
- Outputs (MLflow store, toy checkpoints, Hydra logs, statistics reports) go to
  ``<home>/outputs`` with ``home`` = ``$EMERGENCE_HOME`` when set, else the current
  working directory: the config's ``${emergence_home:}`` resolver
  (:mod:`emergence.common.paths`, shared with ``stats``).
"""

from pathlib import Path

from emergence.common.paths import PROJECT_ROOT, emergence_home, register_resolvers  # noqa: F401  (re-exported)

__version__ = "0.1.0"

#: The Hydra config tree (see the module docstring).
CONF_DIR = Path(__file__).resolve().parent / "conf"
if not (CONF_DIR / "config.yaml").is_file():  # a checkout: the top-level conf/ is the source of truth
    CONF_DIR = PROJECT_ROOT / "conf"

register_resolvers()


class EmergenceError(Exception):
    """A user-facing error: the message names the bad value and the valid choices."""


class OutputError(Exception):
    """A file the job writes could not be written once work had begun (a full disk, a read-only folder):
    one line naming the path, the setting that chose it and the cause; nothing partial is left. Exit 1."""
