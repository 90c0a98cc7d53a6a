"""Structured-config schemas of ``python -m stats`` (and the options of the library).

``conf/stats.yaml`` lists ``stats_schema`` first in its defaults, so Hydra merges the
YAML and the command line into these typed dataclasses: a misspelt key or a wrong
type fails at composition, naming the key. The same dataclasses are the options of
:func:`stats.analysis.analyse` when the suite is used as a library.

Each option's default and constraint (range, choices) sit next to it, in its field and
``metadata``, and nowhere else: the YAML files under ``conf/`` set only what differs, and the
library functions take their keyword defaults from :data:`DEFAULTS`. The schema walker
emergence/common/checks.py (torch-free) checks a composed config: :func:`check_config` (the
command line, before any data is read) and :func:`check_analysis` (the library);
:func:`check_options` checks one options object the library was handed (the verdict rule of
:func:`stats.curve_analysis.analyse_curve`, a milestone rule). The rules across fields (a
milestone rule sets one level; the gap milestones name rules; a source's own settings,
:meth:`stats.sources.Source.check`) are here too, once.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field, make_dataclass
from typing import List, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from emergence.common import head_classes as class_registry  # torch-free: class names and default thresholds
from emergence.common.checks import SEED, check, constraint, problem  # torch-free: the schema walker both apps share
from stats.sources import get as get_source, kinds as source_kinds
from stats.errors import StatsError
from stats.units import UNIT_CHOICES, UNITS, threshold_problem

#: The verdict rule's regimes (stats/shape.py): counts that follow the same heads, or independent draws.
REGIMES = ("identity", "aggregate")
#: ``analysis.changepoint.penalty`` names (or a number >= 0), ``analysis.times.formation`` choices,
#: ``analysis.pr_lead.column`` choices (the per-head PR columns a screen writes).
PENALTIES = ("bic", "bic_revisions")
FORMATIONS = ("t50", "onset")
PR_COLUMNS = ("pr", "pr_corrected")


#: Constraints shared by several fields (see emergence/common/checks.py). The head classes are
#: the registry's, read at each check (:mod:`emergence.common.head_classes`: a class registered
#: after import counts), the choices of every ``*_class`` key.
CLASS = {"choices": class_registry.names}
SHARE = {"gt": 0, "lt": 1}
POSITIVE = {"gt": 0, "finite": True}

#: The unit of each class's per-head column (stats/units.py): ``auto`` (the source's own, else read
#: from the values: all in [0, 1] is a ``score``), ``ratio`` (x over a uniform head) or ``score`` (in
#: [0, 1]). One field per head class of the registry.
UnitsConfig = make_dataclass(
    "UnitsConfig", [(name, str, field(default="auto", metadata={"choices": UNIT_CHOICES})) for name in class_registry.names()],
    namespace={"__doc__": "The unit of each class's per-head values: auto, ratio (x over a uniform head) or score "
                          "(in [0, 1]); stats/units.py.", "__module__": __name__})


@dataclass
class SourceConfig:
    """Where the curves come from: ``mlflow`` (a tracking store), ``csv`` (a file of
    counts) or ``heads_csv`` (a file of per-head selectivities; ``source=xu2026`` is
    the bundled study file)."""

    kind: str = field(default="mlflow", metadata={"choices": source_kinds})
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
    #: the unit of each class's per-head values (``source.units.bos=score``): see UnitsConfig
    units: UnitsConfig = field(default_factory=UnitsConfig)


@dataclass
class FitConfig:
    #: quasi-likelihood / beta-binomial handling where overdispersion is present
    overdispersion: bool = True
    #: overdispersion is present when Pearson X2 exceeds this chi-square quantile
    dispersion_level: float = field(default=0.95, metadata=SHARE)


@dataclass
class ShapeConfig:
    """The verdict rule of :mod:`stats.shape` (sharp / gradual / none)."""

    #: ``none`` below this many revisions with positive tokens
    min_points: int = field(default=5, metadata={"min": 2})
    #: ``none`` when the rise (max - min of the fractions, x the median n) is below this many heads
    min_rise_heads: float = field(default=2.0, metadata={"min": 0, "finite": True})
    #: replicates of the change test (``none`` when its p > alpha; stats/change.py)
    n_perm: int = field(default=1999, metadata={"min": 99})
    #: ``sharp`` when the rise's 10-90 width is at most this many decades of tokens, ``gradual`` when it
    #: is more, ``unresolved`` when the data cannot tell (stats/width.py; why 0.5: docs/methods.md section 8)
    sharp_width_decades: float = field(default=0.5, metadata=POSITIVE)
    #: simulated draws of the boundary test of aggregate counts' claims (stats/width.py ``boundary_p``): its
    #: smallest p-value is 1 / (1 + draws); more draws give more power near alpha (39: a claim needs at most one
    #: draw at the observed difference; 99: four) at up to 2.5x the test's time where a claim is made
    boundary_draws: int = field(default=39, metadata={"min": 39})
    #: resolution rule of the times: a 10-90 width <= width_factor x spacing is unresolved
    width_factor: float = field(default=1.0, metadata=POSITIVE)
    #: ``auto``: ``identity`` where a per-head table follows the heads (heads.csv, heads_csv), else
    #: ``aggregate`` (independent draws); or force one (stats/shape.py, the two regimes)
    regime: str = field(default="auto", metadata={"choices": ("auto",) + REGIMES})
    #: a fall after the peak is a decline (fitted on the rise alone) from this share of the peak (stats/phases.py)
    min_decline_share: float = field(default=0.2, metadata={"gt": 0, "max": 1})
    #: aggregate curves: a flat level below this share of the heads is not told from a background (stats/censoring.py)
    background_share: float = field(default=0.1, metadata={"min": 0, "max": 1})


@dataclass
class ChangepointConfig:
    #: ``bic`` (2 ln sum n), ``bic_revisions`` (2 ln m) or a number
    penalty: str = field(default="bic", metadata={"choices": PENALTIES, "or_number": True, "min": 0, "finite": True})


@dataclass
class TimesConfig:
    #: the induction formation point: the induction curve's ``t50`` or its ``onset``
    formation: str = field(default="t50", metadata={"choices": FORMATIONS})
    early_class: str = field(default="induction", metadata=CLASS)
    late_class: str = field(default="bos", metadata=CLASS)


@dataclass
class FindingsConfig:
    floor_class: str = field(default="bos", metadata=CLASS)
    floor_layers: List[int] = field(default_factory=lambda: [0, 1], metadata={"items": {"min": 0}})
    #: H0 of the floor test: rate in the floor layers >= floor_rate
    floor_rate: float = field(default=0.05, metadata=SHARE)
    #: a layer's onset: first revision with at least this many heads of the class
    onset_min_count: int = field(default=1, metadata={"min": 1})
    #: ... kept at this many consecutive revisions (a head gone at the next revision is no onset)
    onset_persist: int = field(default=2, metadata={"min": 1})
    #: the layers just above the floor that the middle-first claim says gain heads last
    just_above_floor: int = field(default=2, metadata={"min": 1})
    onset_class: str = field(default="bos", metadata=CLASS)
    #: circuit convergence: recall of the final induction set to reach
    recall_level: float = field(default=0.6666666666666666, metadata={"gt": 0, "max": 1})
    convergence_class: str = field(default="induction", metadata=CLASS)
    #: circuit convergence is also computed with the circuit defined at these thresholds (the study's
    #: F4 figures follow from its 30x class rule; 50x is its induction count), besides the analysis threshold
    convergence_thresholds: List[float] = field(default_factory=lambda: [30.0, 50.0], metadata={"items": POSITIVE})
    n_perm: int = field(default=9999, metadata={"min": 99})


@dataclass
class PRLeadConfig:
    #: heads.csv column holding the participation ratio (``pr`` or ``pr_corrected``)
    column: str = field(default="pr", metadata={"choices": PR_COLUMNS})
    #: PR elevated: above the revision's median by k_mad robust SDs (1.4826 MAD)
    k_mad: float = field(default=3.0, metadata={"min": 0, "finite": True})
    #: ... held for this many consecutive revisions (fewer at the end of the series)
    persist: int = field(default=2, metadata={"min": 1})
    top_heads: int = field(default=6, metadata={"min": 1})
    induction_class: str = field(default="induction", metadata=CLASS)


#: Thresholds applied at analysis time to per-head data, in the unit of the class's column
#: (``source.units``: x over a uniform head, or a score in [0, 1]): a head is flagged class c when
#: S_c >= threshold_c. One float field per head class of the registry
#: (emergence/common/head_classes/), its default the class's default threshold (the screen's,
#: and the reference study's: ratios; a score column needs its own, in (0, 1]).
ThresholdsConfig = make_dataclass(
    "ThresholdsConfig", [(name, float, field(default=t)) for name, t in class_registry.default_thresholds().items()],
    namespace={"__doc__": "Thresholds per head class, in the unit of its per-head column; defaults: the registry's "
                          "(ratios, x over a uniform head).",
               "__module__": __name__})


@dataclass
class MilestoneRuleConfig:
    """A first-crossing milestone: the first revision at which ``head_class`` has at
    least ``min_heads`` flagged heads, or a whole-model fraction >= ``min_fraction``
    (exactly one of the two). ``threshold`` overrides the analysis threshold of the
    class for this milestone (per-head data only)."""

    name: str = MISSING
    head_class: str = field(default=MISSING, metadata=CLASS)
    min_heads: Optional[int] = field(default=None, metadata={"min": 1})
    min_fraction: Optional[float] = field(default=None, metadata={"gt": 0, "max": 1})
    threshold: Optional[float] = field(default=None, metadata=POSITIVE)


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
    #: the grid of a class whose column is a ratio (x over a uniform head)
    grid: List[float] = field(default_factory=lambda: [10.0, 20.0, 30.0, 50.0, 100.0], metadata={"items": POSITIVE})
    #: the grid of a class whose column is a score in [0, 1] (stats/units.py)
    score_grid: List[float] = field(default_factory=lambda: [0.1, 0.2, 0.3, 0.5, 0.7],
                                    metadata={"items": {"gt": 0, "max": 1}})
    #: bootstrap replicates per curve of the table (its own, smaller than n_boot)
    n_boot: int = field(default=300, metadata={"min": 1, "max": 100_000})


@dataclass
class PoolingConfig:
    """Pooling across the training runs of a seed suite (stats/pooling.py): a random-effects
    meta-analysis of the runs' log gap ratios, with censored runs as bounds."""

    enabled: bool = True
    #: pool a group with at least this many informative runs
    min_seeds: int = field(default=2, metadata={"min": 2})
    #: between-run variance estimator of statsmodels' combine_effects: Paule-Mandel or DerSimonian-Laird
    tau2_method: str = field(default="pm", metadata={"choices": ("pm", "dl")})


@dataclass
class AnalysisConfig:
    #: At most 100000 (each curve's bootstrap holds n_boot x its points in memory).
    n_boot: int = field(default=1000, metadata={"min": 1, "max": 100_000})
    seed: int = field(default=0, metadata=SEED)
    alpha: float = field(default=0.05, metadata=SHARE)
    level: float = field(default=0.95, metadata=SHARE)
    progress: bool = True
    #: processes for the per-curve analyses (stats/parallel.py): 0 every core once a study has 24
    #: curves or more, 1 serial, k that many; the results are the same (seeded per curve)
    n_jobs: int = field(default=0, metadata={"min": 0})
    fit: FitConfig = field(default_factory=FitConfig)
    shape: ShapeConfig = field(default_factory=ShapeConfig)
    changepoint: ChangepointConfig = field(default_factory=ChangepointConfig)
    times: TimesConfig = field(default_factory=TimesConfig)
    findings: FindingsConfig = field(default_factory=FindingsConfig)
    pr_lead: PRLeadConfig = field(default_factory=PRLeadConfig)
    thresholds: ThresholdsConfig = field(default_factory=ThresholdsConfig, metadata={"items": POSITIVE})
    milestones: MilestonesConfig = field(default_factory=MilestonesConfig)
    sensitivity: SensitivityConfig = field(default_factory=SensitivityConfig)
    pooling: PoolingConfig = field(default_factory=PoolingConfig)


@dataclass
class TrackingConfig:
    """Where the analysis itself is logged (one MLflow run)."""

    #: Log the analysis as one MLflow run at ``uri``: true, false, or null (the default: only when
    #: the source reads a tracking store, ``source=mlflow``; an analysis of a file writes no store).
    log: Optional[bool] = None
    uri: str = MISSING
    #: artifact root for a new experiment; null: beside the store (``<store folder>/mlartifacts``)
    artifacts: Optional[str] = None
    experiment: str = "emergence_stats"


#: The file formats a figure can be written in (:func:`stats.plotstyle.save`).
FIGURE_FORMATS = ("png", "pdf", "svg")


@dataclass
class FiguresConfig:
    """Whether figures are drawn, and in which formats: PNG (what the report shows) by default; a
    paper's vector files on request (``figures.formats=[png,pdf,svg]``)."""

    enabled: bool = True
    formats: List[str] = field(default_factory=lambda: ["png"], metadata={"items": {"choices": FIGURE_FORMATS}})


@dataclass
class StatsConfig:
    source: SourceConfig = field(default_factory=SourceConfig)
    analysis: AnalysisConfig = field(default_factory=AnalysisConfig)
    tracking: TrackingConfig = field(default_factory=TrackingConfig)
    output_dir: str = MISSING
    figures: FiguresConfig = field(default_factory=FiguresConfig)


#: The schema's defaults as one object: the keyword defaults of the library functions.
DEFAULTS = AnalysisConfig()


def check_config(cfg) -> None:
    """Refuse (:class:`~stats.errors.StatsError`, one line) a config whose values break their
    schema's constraints or keys, or whose options contradict each other, before any data is read."""
    check(cfg, StatsConfig, StatsError)
    try:
        get_source(cfg.source.kind).check(cfg.source)
    except OmegaConfBaseException:
        pass  # a setting resolved only inside the Hydra run: the read checks it (stats.sources.read_source)
    _check_milestones(cfg.analysis.milestones, "{key}={name!r} is not a milestone rule name; valid: {valid}", ", ".join)
    declared = {c: u for c, u in OmegaConf.to_container(cfg.source.units).items() if u in UNITS}
    problem_line = units_problem(declared, cfg.analysis, " (source.units.{head_class}={unit})")
    if problem_line:
        raise StatsError(problem_line)


def units_problem(units: dict, analysis, why: str = "") -> Optional[str]:
    """The one line refusing a threshold outside the range of its class's unit (``units``: class ->
    unit name; stats/units.py), or None: ``analysis.thresholds.<class>`` and a milestone rule's own
    ``threshold``. ``why`` (formatted with ``head_class`` and ``unit``) says how the unit was known."""
    thresholds = analysis.thresholds
    for head_class, unit in units.items():
        reason = why.format(head_class=head_class, unit=unit)
        value = thresholds.get(head_class) if isinstance(thresholds, dict) else getattr(thresholds, head_class, None)
        line = None if value is None else threshold_problem(f"analysis.thresholds.{head_class}", value, head_class,
                                                            unit, reason)
        for rule in analysis.milestones.rules:
            if line is None and rule.head_class == head_class and rule.threshold is not None:
                line = threshold_problem(f"analysis.milestones rule {rule.name!r}: threshold", rule.threshold,
                                         head_class, unit, reason)
        if line:
            return line
    return None


def check_analysis(analysis: AnalysisConfig) -> None:
    """:func:`check_config` for the analysis options alone (:func:`stats.analysis.analyse` used as a library)."""
    try:
        node = OmegaConf.structured(analysis)
    except OmegaConfBaseException as exc:
        raise StatsError(f"analysis.{exc.full_key}: {str(exc).splitlines()[0]}") from None
    check(node, AnalysisConfig, StatsError, "analysis.")
    _check_milestones(analysis.milestones, "{key}={name!r}: not a milestone rule name; valid: {valid}")


def check_milestone_rules(rules) -> None:
    """Each milestone rule sets exactly one level: ``min_heads`` or ``min_fraction``."""
    for rule in rules:
        if (rule.min_heads is None) == (rule.min_fraction is None):
            raise StatsError(f"analysis.milestones rule {rule.name!r}: set exactly one of min_heads, min_fraction")


def _check_milestones(milestones, line: str, valid=str) -> None:
    """Each rule sets one level (:func:`check_milestone_rules`) and ``gap_late``, ``gap_early`` name rules, else
    ``analysis.milestones.`` + ``line`` (formatted with ``key``, ``name`` and ``valid``: the names as ``valid`` writes them)."""
    check_milestone_rules(milestones.rules)
    names = [rule.name for rule in milestones.rules]
    for key in ("gap_late", "gap_early"):
        name = getattr(milestones, key)
        if name not in names:
            raise StatsError("analysis.milestones." + line.format(key=key, name=name, valid=valid(names)))


def check_options(options, where: str, sep: str = ":") -> None:
    """Refuse (one line) a value of ``options`` (a schema dataclass instance the library was handed)
    that its field's constraint refuses: ``{where}{field}={value!r}{sep} must be in (0, 1]`` (or
    ``valid: [...]``), the constraint read from the schema (:func:`emergence.common.checks.problem`
    decides, as for the command line)."""
    hints = typing.get_type_hints(type(options))
    for f in dataclasses.fields(options):
        rule = constraint(f)
        value = getattr(options, f.name)
        if not rule or problem(value, rule, integer=hints[f.name] is int) is None:
            continue
        if "choices" in rule:
            choices = rule["choices"]() if callable(rule["choices"]) else rule["choices"]
            raise StatsError(f"{where}{f.name}={value!r}{sep} valid: {list(choices)}")
        raise StatsError(f"{where}{f.name}={value!r}{sep} must be {bounds_text(rule, hints[f.name] is int)}")


def bounds_text(rule: dict, integer: bool = False) -> str:
    """A numeric constraint in words: ``in (0, 1]``, ``an integer >= 2``, ``a finite number > 0``."""
    lower = ("(", rule["gt"]) if "gt" in rule else ("[", rule["min"]) if "min" in rule else None
    upper = (rule["lt"], ")") if "lt" in rule else (rule["max"], "]") if "max" in rule else None
    if lower and upper:
        return f"in {lower[0]}{lower[1]:g}, {upper[0]:g}{upper[1]}"
    kind = "an integer" if integer else "a finite number" if rule.get("finite") else "a number"
    if lower:
        return f"{kind} {'>' if lower[0] == '(' else '>='} {lower[1]:g}"
    if upper:
        return f"{kind} {'<' if upper[1] == ')' else '<='} {upper[0]:g}"
    return kind


def register_configs() -> None:
    """Register the schema ``stats_schema`` in Hydra's ConfigStore (idempotent)."""
    ConfigStore.instance().store(name="stats_schema", node=StatsConfig)


register_configs()
