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

    def summary(self) -> str:
        lines = [g.summary() for g in self.fitted] + [g.summary() for g in self.milestone_gaps]
        lines += [st.warning() for st in self.stories if st.warning()]
        return "\n".join(lines) or "no model has both gap classes"


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


def fitted_gaps(models, by_key: dict, cfg: AnalysisConfig) -> list:
    """The fitted gap of every model with curves of both gap classes (``by_key``: (model, class) ->
    curve analysis)."""
    tc = cfg.times
    return [fitted_gap(m, by_key[(m, tc.late_class)], by_key[(m, tc.early_class)], cfg) for m in models
            if (m, tc.late_class) in by_key and (m, tc.early_class) in by_key]


def model_stories(models, by_key: dict, gaps: list, m_gaps: list, cfg: AnalysisConfig) -> list:
    """The :class:`stats.story.GapStory` of every model with a fitted gap."""
    tc = cfg.times
    fitted = {g.model: g for g in gaps}
    miles = {g.model: g for g in m_gaps}
    return [gap_story(m, fitted[m], miles.get(m), by_key.get((m, tc.late_class)), by_key.get((m, tc.early_class)),
                      cfg.shape.min_points, cfg.shape.min_rise_heads) for m in models if m in fitted]


def analyse_gaps(results, by_key: dict, cfg: AnalysisConfig, thresholds: dict) -> Gaps:
    """The gap stage of ``results`` (at the analysis ``thresholds``) given its curve analyses."""
    rules = [MilestoneRule.from_config(r) for r in cfg.milestones.rules]
    fitted = fitted_gaps(results.models, by_key, cfg)
    milestones = compute_milestones(results, rules, thresholds)
    m_gaps = milestone_gaps(milestones, cfg.milestones.gap_late, cfg.milestones.gap_early)
    return Gaps(fitted, milestones, m_gaps, model_stories(results.models, by_key, fitted, m_gaps, cfg))
