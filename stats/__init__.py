"""stats: the statistics suite of the project, reading tracked results only.

It answers the study's statistical questions from tracked screen runs (or a CSV of
curves): is a transition sharp or gradual, when does it happen, how far apart are
the induction and attention-sink transitions, and is the separation real.
Definitions follow METHODS section 8; each module states the math it implements.

Flow (one direction; this package never imports ``emergence``):
    curves (read MLflow / CSV), heads (per-head tables, thresholds at analysis time)
    -> models (fits) -> changepoint, shape, times, hypotheses, findings, pr_lead,
    milestones, sensitivity -> analysis (+ reference: the study's reported figures)
    -> figures, report -> ``python -m stats``.
"""

from pathlib import Path

from omegaconf import OmegaConf

__version__ = "0.1.0"

#: The project checkout (holds ``conf/`` and ``outputs/``); same definition as emergence.
PROJECT_ROOT = Path(__file__).resolve().parents[1]

if not OmegaConf.has_resolver("project_root"):
    OmegaConf.register_new_resolver("project_root", lambda: str(PROJECT_ROOT))

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
