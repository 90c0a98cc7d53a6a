"""stats: the statistics suite of the project, reading tracked results only.

It answers the study's statistical questions from tracked screen runs (or a CSV of
curves): is a transition sharp or gradual, when does it happen, how far apart are
the induction and attention-sink transitions, and is the separation real.
Definitions follow METHODS section 8; each module states the math it implements.

Flow (one direction; of ``emergence`` this package imports only the model-free run
contract ``emergence.contract`` and head-class registry ``emergence.contract.head_classes``):
    curves (read MLflow / CSV), heads (per-head tables, thresholds at analysis time)
    -> models (fits) -> changepoint, shape, times, hypotheses, findings, pr_lead,
    milestones, sensitivity -> analysis (+ reference: the study's reported figures)
    -> figures, report -> ``python -m stats``.
"""

import os
from pathlib import Path

from omegaconf import OmegaConf

__version__ = "0.1.0"

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


def _help_text() -> str:
    from stats.help import help_text

    return help_text().replace("$", "$$")  # Hydra's template is a string.Template


if not OmegaConf.has_resolver("project_root"):
    OmegaConf.register_new_resolver("project_root", lambda: str(PROJECT_ROOT))
if not OmegaConf.has_resolver("emergence_home"):
    OmegaConf.register_new_resolver("emergence_home", lambda: str(emergence_home()))
if not OmegaConf.has_resolver("stats_help"):  # `python -m stats --help` (conf/stats.yaml, hydra.help)
    OmegaConf.register_new_resolver("stats_help", _help_text)

from stats.errors import StatsError  # noqa: E402
from stats.curves import Curve, TrackedResults, read_csv, read_mlflow  # noqa: E402
from stats.models import (  # noqa: E402
    ConstantModel,
    LogisticModel,
    RampModel,
    StepModel,
    fit_all,
)
from stats.heads import apply_thresholds, read_heads_csv  # noqa: E402
from stats.analysis import analyse, analyse_curve  # noqa: E402

__all__ = [
    "PROJECT_ROOT",
    "CONF_DIR",
    "emergence_home",
    "StatsError",
    "Curve",
    "TrackedResults",
    "read_csv",
    "read_mlflow",
    "read_heads_csv",
    "apply_thresholds",
    "LogisticModel",
    "StepModel",
    "RampModel",
    "ConstantModel",
    "fit_all",
    "analyse",
    "analyse_curve",
]
