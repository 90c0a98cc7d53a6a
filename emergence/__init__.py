"""emergence: when do attention circuits form during training?

Flow: config -> registry -> model at revision -> probe -> screens -> tracking.

Where things are (the same rule in ``stats``):

- ``CONF_DIR``, the Hydra config tree: ``emergence/conf`` in an installed copy (the
  wheel ships the checkout's top-level ``conf/`` there), else ``<checkout>/conf``.
- Outputs (MLflow store, toy checkpoints, Hydra logs, statistics reports) go to
  ``<home>/outputs`` with ``home`` = ``$EMERGENCE_HOME`` when set, else the current
  working directory: the config's ``${emergence_home:}`` resolver.
"""

import os
from pathlib import Path

from omegaconf import OmegaConf

__version__ = "0.1.0"

#: The folder that holds the packages: the checkout in an editable install,
#: ``site-packages`` in an installed copy.
PROJECT_ROOT = Path(__file__).resolve().parents[1]
#: The Hydra config tree (see the module docstring).
CONF_DIR = Path(__file__).resolve().parent / "conf"
if not (CONF_DIR / "config.yaml").is_file():  # a checkout: the top-level conf/ is the source of truth
    CONF_DIR = PROJECT_ROOT / "conf"


def emergence_home() -> Path:
    """The folder whose ``outputs/`` receives what a run writes: ``$EMERGENCE_HOME``, else the cwd."""
    home = os.environ.get("EMERGENCE_HOME")
    return Path(home).expanduser().resolve() if home else Path.cwd().resolve()


if not OmegaConf.has_resolver("project_root"):
    OmegaConf.register_new_resolver("project_root", lambda: str(PROJECT_ROOT))
if not OmegaConf.has_resolver("emergence_home"):
    OmegaConf.register_new_resolver("emergence_home", lambda: str(emergence_home()))


class EmergenceError(Exception):
    """A user-facing error: the message names the bad value and the valid choices."""
