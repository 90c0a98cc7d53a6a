"""Threshold sensitivity: do the verdicts, times and gap survive other thresholds?

For each model with per-head selectivities of both gap classes and each grid value g (in
the unit of the class's column, stats/units.py: ``analysis.sensitivity.grid`` for a ratio,
``score_grid`` for a score), the curve of ONE class is re-counted at g, the other class kept
at its analysis threshold, and analysed as in the main table (``analysis.sensitivity.n_boot``
replicates); the gap ratio is recomputed against the other class's main analysis. One class
at a time, so that each row says which threshold moves the answer; the row at a class's own
threshold is the main analysis itself. A censored row keeps its bound (``censored``,
``t50_bound``, ``gap_bound``); a class with no head at a threshold has ``max_fraction`` 0.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from emergence.common.contract import selectivity_column
from stats.gaps import fitted_gap
from stats.heads import class_counts
from stats.parallel import map_tasks, seeded_analysis
from stats.results import HEAD_CLASS_KEY, Results
from stats.tracked import Curve
from stats.units import get_unit


@dataclass(kw_only=True)
class SensitivityRow(Results):
    """One class re-counted at one grid threshold, its verdict and t50, and the gap against the other class."""

    RENAME = HEAD_CLASS_KEY

    model: str
    threshold: float
    other_class: str
    other_threshold: float
    is_analysis_threshold: bool
    k_last: float
    n_last: float
    max_fraction: float
    #: the smallest fraction over the revisions: 1 when every head is flagged at every revision (a
    #: threshold below the values' floor, no transition to time)
    min_fraction: float
    shape: str
    reason: str
    t50: float = None
    t50_ci: list = None
    t50_bound: str = None
    gap_ratio: float = None
    gap_ratio_ci: list = None
    gap_p_value: float = None
    gap_bound: str = None
    #: ``left`` / ``right`` when the re-counted curve's rise lies outside the range (its t50 a bound)
    censored: str = None
    #: the unit of the class's per-head column (stats/units.py) and the threshold written in it
    unit: str = "ratio"
    threshold_text: str = ""
    #: the class whose threshold the row sets (written last, ``class``)
    head_class: str


@dataclass
class Sensitivity(Results):
    """The threshold-sensitivity table (module docstring)."""

    grid: list
    n_boot: int
    rule: str
    rows: list = field(default_factory=list)
    #: the grid of each class, in its unit (``grid`` for a ratio, ``score_grid`` for a score)
    grids: dict = field(default_factory=dict)

    def summary(self) -> str:
        changed = sorted({(r.model, r.head_class) for r in self.rows if r.shape != self.rows[0].shape}) if self.rows else []
        return (f"{len(self.rows)} rows over thresholds {self.grid} ({self.n_boot} replicates a curve)"
                + (f"; verdicts vary for {changed}" if changed else ""))


RULE = ("each grid value sets the threshold of one class (rows grouped by class); the other class keeps its "
        "analysis threshold; gap = t50(late) / t(early) against the other class's main analysis")


def threshold_sensitivity(results, analyses: dict, cfg, seed) -> Sensitivity:
    """The sensitivity table of ``results`` (at the analysis thresholds, with its per-head
    table) given the main curve analyses ``{(model, class): CurveAnalysis}``; ``seed``
    an int or a :class:`numpy.random.SeedSequence`."""
    sc, tc = cfg.sensitivity, cfg.times
    out = Sensitivity([float(g) for g in sc.grid], int(sc.n_boot), RULE)
    heads = results.heads
    if not sc.enabled or heads is None:
        return out
    classes = (tc.late_class, tc.early_class)
    if not all(selectivity_column(c) in heads.columns for c in classes):
        return out
    thr = results.source.get("thresholds") or {}
    units = {c: get_unit((results.source.get("units") or {}).get(c)) for c in classes}
    out.grids = {c: [float(g) for g in getattr(sc, units[c].grid_key)] for c in classes}
    scfg = dataclasses.replace(cfg, n_boot=int(sc.n_boot))
    models = [m for m in results.models if all((m, c) in analyses for c in classes)]
    seq = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
    seeds = iter(seq.spawn(max(1, len(models) * sum(len(g) for g in out.grids.values()))))
    cells = [(model, head_class, other, g, next(seeds)) for model in models
             for head_class, other in (classes, classes[::-1]) for g in out.grids[head_class]]
    own = [bool(np.isclose(g, thr.get(head_class, np.nan))) for _, head_class, _, g, _ in cells]
    tasks = [(_recounted_curve(results, model, head_class, g), seed)
             for (model, head_class, _, g, seed), is_own in zip(cells, own) if not is_own]
    recounted = iter(map_tasks(seeded_analysis, tasks, cfg.n_jobs, cfg=scfg))
    for (model, head_class, other, g, _), is_own in zip(cells, own):
        ca = analyses[(model, head_class)] if is_own else next(recounted)
        pair = {head_class: ca, other: analyses[(model, other)]}
        gap = fitted_gap(model, pair[tc.late_class], pair[tc.early_class], scfg)
        out.rows.append(_row(ca, g, is_own, other, float(thr.get(other, np.nan)), gap, units[head_class]))
    return out


def _recounted_curve(results, model: str, head_class: str, threshold: float) -> Curve:
    """``model``'s ``head_class`` curve re-counted at ``threshold``: the same heads, re-counted."""
    d = class_counts(results.model_heads(model), head_class, threshold).sort_values("tokens")
    curve = Curve.from_frame(d, model, head_class, results.corpus(model), identity=True)
    return results.follow_heads(curve, d, threshold)


def _row(ca, threshold: float, own: bool, other: str, other_threshold: float, gap, unit) -> SensitivityRow:
    c, t = ca.curve, ca.times
    nan = float("nan")
    return SensitivityRow(
        model=c.model, head_class=c.head_class, threshold=threshold, other_class=other, other_threshold=other_threshold,
        is_analysis_threshold=own, k_last=float(c.k[-1]) if len(c) else nan, n_last=float(c.n[-1]) if len(c) else nan,
        max_fraction=float(c.fraction.max()) if len(c) else nan, min_fraction=float(c.fraction.min()) if len(c) else nan,
        shape=ca.verdict.shape, reason=ca.verdict.reason,
        t50=getattr(t, "t50", None), t50_ci=getattr(t, "t50_ci", None), t50_bound=getattr(t, "t50_bound", None),
        gap_ratio=gap.ratio, gap_ratio_ci=gap.ratio_ci, gap_p_value=gap.p_value, gap_bound=gap.bound,
        censored=ca.censored, unit=unit.name, threshold_text=unit.format(threshold))
