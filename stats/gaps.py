"""The gap stage: how far apart are the early (induction) and the late (BOS) transitions?

Two definitions per model (:mod:`stats.story` sets them side by side):

- *fitted*: t50 of the late class over the early class's formation point, from the two
  curve analyses' bootstrap draws (:func:`stats.times.gap_ratio`, :func:`fitted_gap`);
- *milestone*: the study's first-crossing milestones (:mod:`stats.milestones`), their
  ratio ``gap_late`` / ``gap_early`` with its resolution interval.

:func:`analyse_gaps` returns both, the milestones and each model's story as :class:`Gaps`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from stats.config import AnalysisConfig
from stats.milestones import MilestoneRule, compute_milestones, milestone_gaps
from stats.results import Results
from stats.story import gap_story
from stats.times import GapRatio, gap_ratio


@dataclass
class Gaps(Results):
    """The gap stage's result: per model its fitted gap, milestones, milestone gap and story."""

    fitted: list = field(default_factory=list)
    milestones: list = field(default_factory=list)
    milestone_gaps: list = field(default_factory=list)
    stories: list = field(default_factory=list)


def fitted_gap(model: str, late, early, cfg: AnalysisConfig) -> GapRatio:
    """Fitted gap ratio t50(late) / t(early) of two curve analyses (:func:`stats.times.gap_ratio`);
    an early class with no transition but heads from the first revision counts as
    already formed (a lower-bound ratio); no transition otherwise: a NaN ratio with a note."""
    tc = cfg.times
    if late.times is None or early.times is None:
        missing = [a.head_class for a in (late, early) if a.times is None]
        nan = float("nan")
        return GapRatio(model, tc.late_class, tc.early_class, tc.formation, nan, nan, nan, [nan, nan], nan,
                        notes=[f"no transition in {', '.join(missing)} (shape none): no ratio"], level=cfg.level)
    return gap_ratio(model, late.times, early.times, tc.formation, tc.late_class, tc.early_class, cfg.level)


def analyse_gaps(results, by_key: dict, cfg: AnalysisConfig, thresholds: dict) -> Gaps:
    """The gap stage of ``results`` (at the analysis ``thresholds``) given its curve analyses."""
    late, early = cfg.times.late_class, cfg.times.early_class
    both = [m for m in results.models if (m, late) in by_key and (m, early) in by_key]
    fitted = [fitted_gap(m, by_key[(m, late)], by_key[(m, early)], cfg) for m in both]
    milestones = compute_milestones(results, [MilestoneRule.from_config(r) for r in cfg.milestones.rules], thresholds)
    m_gaps = milestone_gaps(milestones, cfg.milestones.gap_late, cfg.milestones.gap_early)
    miles = {g.model: g for g in m_gaps}
    stories = [gap_story(m, g, miles.get(m), by_key[(m, late)], by_key[(m, early)], cfg.shape.min_points,
                         cfg.shape.min_rise_heads) for m, g in zip(both, fitted)]
    return Gaps(fitted, milestones, m_gaps, stories)
