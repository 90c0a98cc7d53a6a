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

SOURCE_KINDS = ("mlflow", "csv", "heads_csv")


@dataclass
class SourceConfig:
    """Where the curves come from: ``mlflow`` (a tracking store), ``csv`` (a file of
    counts) or ``heads_csv`` (a file of per-head selectivities; ``source=xu2026`` is
    the bundled study file)."""

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
    #: the file for ``kind: csv`` (columns model,class,tokens,k,n[,layer]) or
    #: ``kind: heads_csv`` (model,revision,tokens,layer,head + a selectivity column per class)
    path: Optional[str] = None


@dataclass
class FitConfig:
    #: quasi-likelihood / beta-binomial handling where overdispersion is present
    overdispersion: bool = True
    #: overdispersion is present when Pearson X2 exceeds this chi-square quantile
    dispersion_level: float = 0.95


@dataclass
class ShapeConfig:
    """The verdict rule of :mod:`stats.shape` (sharp / gradual / none)."""

    #: ``none`` below this many revisions with positive tokens
    min_points: int = 5
    #: ``none`` when the rise (max - min of the fractions, x the median n) is below this many heads
    min_rise_heads: float = 2.0
    #: permutations of the monotone-change test (``none`` when its p > alpha)
    n_perm: int = 1999
    #: ``sharp`` when the largest adjacent jump holds at least this share of the rise
    min_jump_share: float = 0.5
    #: resolution rule of the times: a 10-90 width <= width_factor x spacing is unresolved
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
class ThresholdsConfig:
    """Selectivity thresholds applied at analysis time to per-head data (x over a
    uniform head): a head is flagged class c when S_c >= threshold_c. Defaults: the
    screen's (and the reference study's)."""

    induction: float = 50.0
    previous_token: float = 30.0
    duplicate_token: float = 30.0
    bos: float = 30.0
    self: float = 30.0
    local: float = 10.0


@dataclass
class MilestoneRuleConfig:
    """A first-crossing milestone: the first revision at which ``head_class`` has at
    least ``min_heads`` flagged heads, or a whole-model fraction >= ``min_fraction``
    (exactly one of the two). ``threshold`` overrides the analysis threshold of the
    class for this milestone (per-head data only)."""

    name: str = MISSING
    head_class: str = MISSING
    min_heads: Optional[int] = None
    min_fraction: Optional[float] = None
    threshold: Optional[float] = None


def _study_milestones():
    rules = [MilestoneRuleConfig("induction formed", "induction", min_heads=3)]
    rules += [MilestoneRuleConfig(f"BOS-{p}%", "bos", min_fraction=p / 100) for p in (10, 30, 50, 70)]
    return rules


@dataclass
class MilestonesConfig:
    """The study's milestones (defaults) and the milestone gap ratio late / early."""

    rules: List[MilestoneRuleConfig] = field(default_factory=_study_milestones)
    gap_late: str = "BOS-50%"
    gap_early: str = "induction formed"


@dataclass
class SensitivityConfig:
    """Threshold-sensitivity table: each grid value replaces the threshold of one class
    (``times.late_class``, then ``times.early_class``), the other kept at its
    analysis threshold. Needs per-head data."""

    enabled: bool = True
    grid: List[float] = field(default_factory=lambda: [10.0, 20.0, 30.0, 50.0, 100.0])
    #: bootstrap replicates per curve of the table (its own, smaller than n_boot)
    n_boot: int = 300


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
    thresholds: ThresholdsConfig = field(default_factory=ThresholdsConfig)
    milestones: MilestonesConfig = field(default_factory=MilestonesConfig)
    sensitivity: SensitivityConfig = field(default_factory=SensitivityConfig)


@dataclass
class TrackingConfig:
    """Where the analysis itself is logged (one MLflow run)."""

    log: bool = True
    uri: str = MISSING
    #: artifact root for a new experiment; null: beside the store (``<store folder>/mlartifacts``)
    artifacts: Optional[str] = None
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
