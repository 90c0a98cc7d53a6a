"""Structured-config schemas of ``python -m stats`` (and the options of the library).

``conf/stats.yaml`` lists ``stats_schema`` first in its defaults, so Hydra merges the
YAML and the command line into these typed dataclasses: a misspelt key or a wrong
type fails at composition, naming the key. The same dataclasses are the options of
:func:`stats.analysis.analyse` when the suite is used as a library.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

SOURCE_KINDS = ("mlflow", "csv")


@dataclass
class SourceConfig:
    """Where the curves come from: ``mlflow`` (a tracking store) or ``csv`` (a file)."""

    kind: str = "mlflow"
    tracking_uri: Optional[str] = None
    experiment: str = "emergence"
    #: an MLflow search filter, e.g. ``params.model = 'pythia_1b'``
    filter: Optional[str] = None
    #: keep the runs of one sweep (tag ``emergence.sweep``); ``latest``: the newest run's
    sweep: Optional[str] = None
    models: Optional[List[str]] = None
    #: keep runs whose ``emergence.status`` tag equals this (null: all)
    status: Optional[str] = "complete"
    read_heads: bool = True
    #: the CSV file for ``kind: csv`` (columns model,class,tokens,k,n[,layer])
    path: Optional[str] = None


@dataclass
class FitConfig:
    #: quasi-likelihood / beta-binomial handling where overdispersion is present
    overdispersion: bool = True
    #: overdispersion is present when Pearson X2 exceeds this chi-square quantile
    dispersion_level: float = 0.95


@dataclass
class ShapeConfig:
    min_points: int = 5
    min_rise: float = 0.02
    delta_aicc_none: float = 2.0
    min_jump_share: float = 0.5
    width_factor: float = 1.0


@dataclass
class ChangepointConfig:
    #: ``bic`` (2 ln sum n), ``bic_revisions`` (2 ln m) or a number
    penalty: str = "bic"


@dataclass
class TimesConfig:
    #: the induction formation point: the induction curve's ``t50`` or its ``onset``
    formation: str = "t50"
    early_class: str = "induction"
    late_class: str = "bos"


@dataclass
class FindingsConfig:
    floor_class: str = "bos"
    floor_layers: List[int] = field(default_factory=lambda: [0, 1])
    #: H0 of the floor test: rate in the floor layers >= floor_rate
    floor_rate: float = 0.05
    #: a layer's onset: first revision with at least this many heads of the class
    onset_min_count: int = 1
    onset_class: str = "bos"
    #: circuit convergence: recall of the final induction set to reach
    recall_level: float = 0.6666666666666666
    convergence_class: str = "induction"
    n_perm: int = 9999


@dataclass
class PRLeadConfig:
    #: heads.csv column holding the participation ratio (``pr`` or ``pr_corrected``)
    column: str = "pr"
    #: PR elevated: above the revision's median by k_mad robust SDs (1.4826 MAD)
    k_mad: float = 3.0
    #: ... held for this many consecutive revisions (fewer at the end of the series)
    persist: int = 2
    top_heads: int = 6
    induction_class: str = "induction"


@dataclass
class AnalysisConfig:
    n_boot: int = 1000
    seed: int = 0
    alpha: float = 0.05
    level: float = 0.95
    progress: bool = True
    fit: FitConfig = field(default_factory=FitConfig)
    shape: ShapeConfig = field(default_factory=ShapeConfig)
    changepoint: ChangepointConfig = field(default_factory=ChangepointConfig)
    times: TimesConfig = field(default_factory=TimesConfig)
    findings: FindingsConfig = field(default_factory=FindingsConfig)
    pr_lead: PRLeadConfig = field(default_factory=PRLeadConfig)


@dataclass
class TrackingConfig:
    """Where the analysis itself is logged (one MLflow run)."""

    log: bool = True
    uri: str = MISSING
    artifacts: str = MISSING
    experiment: str = "emergence_stats"


@dataclass
class StatsConfig:
    source: SourceConfig = field(default_factory=SourceConfig)
    analysis: AnalysisConfig = field(default_factory=AnalysisConfig)
    tracking: TrackingConfig = field(default_factory=TrackingConfig)
    output_dir: str = MISSING
    figures: bool = True


def register_configs() -> None:
    """Register the schema ``stats_schema`` in Hydra's ConfigStore (idempotent)."""
    ConfigStore.instance().store(name="stats_schema", node=StatsConfig)


register_configs()
