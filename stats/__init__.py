"""stats: the statistics suite of the project, reading tracked results only.

It answers the study's statistical questions from tracked screen runs (or a CSV of
curves): is a transition sharp or gradual, when does it happen, how far apart are
the induction and attention-sink transitions, and is the separation real.
Definitions follow METHODS section 8; each module states the math it implements.

Stages (one direction; of ``emergence`` this package imports only the model-free run
contract ``emergence.common.contract`` and its submodules), each returning a results object
(:mod:`stats.results`: fields, ``summary()`` text, ``to_dict()`` derived from the fields):

    read       stats.sources (one module per source kind)  -> stats.tracked.TrackedResults
    curves     stats.heads (thresholds at analysis time)   -> stats.tracked.Curve
    per curve  stats.curve_analysis (models, changepoint, shape, times, censoring, phases)
                                                           -> CurveAnalysis
    gaps       stats.gaps (times, milestones, story)        -> GapRatio, MilestoneGap, GapStory
    pooling    stats.pooling                                -> PooledGap
    study      stats.analysis (+ findings, pr_lead, sensitivity, reference) -> StudyAnalysis
    report     stats.report, stats.figures                  -> summary.json, tables, figures, report.md

``python -m stats`` (stats/__main__.py) and :mod:`stats.api` run them.
"""

from omegaconf import OmegaConf

from emergence.common.paths import register_resolvers
from stats.paths import CONF_DIR, PROJECT_ROOT, emergence_home
from stats.help import help_text
from stats.errors import StatsError
from stats.tracked import Curve, TrackedResults
from stats.sources.csv import read_csv
from stats.sources.mlflow import read_mlflow
from stats.sources.heads_csv import read_heads_csv
from stats.models import (
    ConstantModel,
    LogisticModel,
    RampModel,
    StepModel,
    fit_all,
)
from stats.heads import apply_thresholds
from stats.curve_analysis import analyse_curve
from stats.analysis import analyse

__version__ = "0.1.0"


register_resolvers()  # ${project_root:}, ${emergence_home:} (emergence/common/paths.py)
if not OmegaConf.has_resolver("stats_help"):  # `python -m stats --help` (conf/stats.yaml, hydra.help)
    OmegaConf.register_new_resolver("stats_help", lambda: help_text().replace("$", "$$"))  # a string.Template

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
