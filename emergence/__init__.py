"""emergence: when do attention circuits form during training?

Flow: config -> registry -> model at revision -> probe -> screens -> tracking.
"""

from pathlib import Path

from omegaconf import OmegaConf

__version__ = "0.1.0"

#: The project checkout (holds ``conf/`` and ``outputs/``).
PROJECT_ROOT = Path(__file__).resolve().parents[1]

if not OmegaConf.has_resolver("project_root"):
    OmegaConf.register_new_resolver("project_root", lambda: str(PROJECT_ROOT))


class EmergenceError(Exception):
    """A user-facing error: the message names the bad value and the valid choices."""
