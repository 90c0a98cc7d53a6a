"""One story per model: do its fitted and milestone gaps agree, and if not, why?

A model's gap between its early class (induction) and its late class (BOS) is
estimated twice: *fitted* (t50 of the logistic fits, a sampling interval;
:mod:`stats.times`) and *milestone* (the study's first-crossing revisions, a
resolution interval; :mod:`stats.milestones`). They measure different things (a
midpoint against the first crossing of a level), so they need not match, but a
report that prints ``20.95x`` in one table and ``0.23`` in another tells two
stories. :func:`gap_story` compares them:

- they *disagree in direction* when both say on which side of 1 the ratio lies
  and the sides differ (a one-sided bound says it only when the bound itself is
  on that side: ``ratio >= 7`` says "> 1", ``ratio >= 0.5`` says nothing);
- they *disagree in size* when their intervals do not overlap (an open end,
  None, reaches to 0 or infinity);

and names the reasons found in the data: *censoring* (a curve's rise midpoint
outside the range, or a milestone met at the first revision or never), a
*non-monotone count* (a decline after the peak, or a fall of at least
``min_rise_heads`` heads between revisions), *too few points or heads* (a curve
with fewer than ``min_points`` revisions or a rise of at most
``FEW_HEADS`` heads). Which figure to trust follows from the reason: a censored
side is handled by the fitted bound (the milestone's point then assumes a crossing
at the first revision); a non-monotone count or a rise of a few heads breaks the
fit's assumptions, and first crossings do not need them; with no reason found the
two definitions are reported side by side. The report puts the story, and any
disagreement, at the top of the model's section.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from stats.config import DEFAULTS
from stats.results import Results, record
from stats.units import format_tokens

#: A rise of at most this many heads is "few heads": its fitted t50 rests on single heads switching.
FEW_HEADS = 5


def _side(ratio, bound) -> Optional[str]:
    """">1" / "<1" when the gap says on which side of 1 it lies, else None."""
    if ratio is None or not np.isfinite(ratio):
        return None
    if bound == "lower":
        return ">1" if ratio > 1 else None
    if bound == "upper":
        return "<1" if ratio < 1 else None
    return ">1" if ratio > 1 else ("<1" if ratio < 1 else None)


def _overlap(a, b) -> Optional[bool]:
    """Whether two intervals ``[lo, hi]`` (None: open) overlap; None when either is unknown."""
    if not a or not b:
        return None
    vals = [v for v in (*a, *b) if v is not None]
    if any(not np.isfinite(v) for v in vals):
        return None
    lo = max(0.0 if a[0] is None else a[0], 0.0 if b[0] is None else b[0])
    hi = min(np.inf if a[1] is None else a[1], np.inf if b[1] is None else b[1])
    return bool(lo <= hi)


_fmt = format_tokens


def _interval(ci) -> str:
    if not ci:
        return "-"
    lo, hi = ci
    if lo is None and hi is None:
        return "-"
    return f"[{'-' if lo is None else _fmt(lo)}, {'-' if hi is None else _fmt(hi)}]"


def describe_time(ca) -> str:
    """One clause on a curve's transition time: its t50 and interval, or its bound."""
    if ca is None:
        return "no curve"
    t = ca.times
    if ca.censored == "left":
        return f"{ca.head_class} at or before {_fmt(t.t50)} (left-censored)"
    if ca.censored == "right":
        return f"{ca.head_class} not before {_fmt(t.t50)} (right-censored)"
    if t is None:
        return f"{ca.head_class}: no transition ({ca.verdict.reason.split(':')[0]})"
    return f"{ca.head_class} at ~{_fmt(t.t50)} {_interval(t.t50_ci)} ({ca.verdict.shape})"


def describe_gap(g) -> str:
    if g is None or g.ratio is None or not np.isfinite(g.ratio):
        return "no fitted gap"
    sign = {"lower": ">= ", "upper": "<= "}.get(g.bound, "")
    p = "" if g.p_value is None or not np.isfinite(g.p_value) else f", p = {g.p_value:.3g}"
    return f"gap {sign}{g.ratio:.3g}x {_ratio_ci(g.ratio_ci)}{p}"


def _ratio_ci(ci) -> str:
    if not ci or (ci[0] is None and ci[1] is None):
        return "[-]"
    lo = "-" if ci[0] is None or not np.isfinite(ci[0]) else f"{ci[0]:.3g}"
    hi = "-" if ci[1] is None or not np.isfinite(ci[1]) else f"{ci[1]:.3g}"
    return f"[{lo}, {hi}]"


@dataclass
class GapStory(Results):
    """The fitted and milestone gaps of one model side by side, and whether they agree."""

    model: str
    text: str
    fitted: Optional[dict] = None
    milestone: Optional[dict] = None
    agree: Optional[bool] = None
    #: ``direction`` or ``size`` when they disagree
    disagreement: Optional[str] = None
    reasons: list = field(default_factory=list)
    trust: Optional[str] = None

    def warning(self) -> Optional[str]:
        """The line the report puts first in the model's section, or None."""
        if self.agree is not False:
            return None
        why = "; ".join(self.reasons) or "no reason found in the data"
        return (f"The fitted and the milestone gap disagree in {self.disagreement} ({why}). Trust: {self.trust}")

    def to_dict(self) -> dict:
        """The record, with the :meth:`warning` line last."""
        return record(self) | {"warning": self.warning()}

    def summary(self) -> str:
        return self.text + (f"\n{self.warning()}" if self.warning() else "")


def _reasons(curves, milestones, min_points: int, min_rise_heads: float) -> list:
    out = []
    for ca in curves:
        if ca is None:
            continue
        if ca.censored:
            out.append(f"censoring: {ca.head_class} is {ca.censored}-censored")
        c = ca.curve
        if ca.phases is not None and ca.phases.decline is not None:
            out.append(f"non-monotone count: {ca.head_class} {ca.phases.decline.describe()}")
        elif len(c) > 1:
            k = np.asarray(c.k, float) * (np.median(c.n) / np.where(c.n > 0, c.n, 1))
            drawdown = float(np.max(np.maximum.accumulate(k) - k))
            if drawdown >= min_rise_heads:
                out.append(f"non-monotone count: {ca.head_class} falls by {drawdown:.3g} heads below an earlier level")
        rise = ca.verdict.evidence.get("rise_heads")
        if len(c) < min_points:
            out.append(f"too few points: {ca.head_class} has {len(c)} revisions")
        elif rise is not None and 0 < rise <= FEW_HEADS and not ca.censored:
            out.append(f"few heads: the {ca.head_class} rise is {rise:.3g} heads")
    for m in milestones:
        if m is None:
            continue
        if m.reached and m.previous_revision is None:
            out.append(f"censoring: milestone {m.name!r} is met at the first revision")
        elif not m.reached:
            out.append(f"censoring: milestone {m.name!r} is not reached by the last revision")
    return out


def _trust(reasons: list) -> str:
    if any(r.startswith("censoring") for r in reasons) and not any(r.startswith(("non-monotone", "few", "too few"))
                                                                    for r in reasons):
        return ("the fitted gap, a one-sided bound where a side is censored; a milestone met at the first revision "
                "or never has no point of its own")
    if any(r.startswith(("non-monotone", "few", "too few")) for r in reasons):
        return ("the milestone gap: first crossings need neither a monotone count nor many heads, which the "
                "logistic fit assumes")
    return "neither alone: they measure different things (a midpoint against a first crossing); report both"


def gap_story(model: str, fitted, milestone, late, early, min_points: int = DEFAULTS.shape.min_points,
              min_rise_heads: float = DEFAULTS.shape.min_rise_heads) -> GapStory:
    """The :class:`GapStory` of ``model`` from its fitted gap (:class:`stats.times.GapRatio`),
    its milestone gap (:class:`stats.milestones.MilestoneGap`) and the two curve analyses."""
    times = f"{describe_time(early)}, {describe_time(late)}"
    text = f"{times}: {describe_gap(fitted)}"
    if milestone is not None:
        text += (f"; milestone gap {milestone.late.name} / {milestone.early.name} "
                 f"{'-' if milestone.ratio is None else f'{milestone.ratio:.3g}x'} {_ratio_ci(milestone.ratio_ci)}")
    story = GapStory(model, text, None if fitted is None else fitted.to_dict(),
                     None if milestone is None else milestone.to_dict())
    if fitted is None or milestone is None:
        return story
    f_side = _side(fitted.ratio, fitted.bound)
    m_side = _side(milestone.ratio, milestone.bound)
    overlap = _overlap(fitted.ratio_ci, milestone.ratio_ci)
    if f_side and m_side and f_side != m_side:
        story.agree, story.disagreement = False, "direction"
    elif overlap is False:
        story.agree, story.disagreement = False, "size"
    elif f_side and m_side:
        story.agree = True
    story.reasons = _reasons([late, early], [milestone.late, milestone.early], min_points, min_rise_heads)
    if story.agree is False:
        story.trust = _trust(story.reasons)
    return story
