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
``FEW_HEADS`` heads).

Which direction, if any, the evidence establishes (:func:`weigh`, with the model's rows of the
threshold-sensitivity table, :func:`weigh_stories`): a direction is established where the fitted
interval or the milestone bracket (both milestones reached) excludes 1 on that side and nothing
points the other way (the other definition's interval or point, the fitted point, a sensitivity
row's interval); else the gap is *not established*, and the assessment says why. A milestone never
reached (or met at the first revision) gives a bound, never a figure. A figure is the one to trust
only when it establishes the direction that the rest does not contradict; where the two gaps
disagree and none does, the report trusts neither. Every bound keeps its sign (``>=``, ``<=``) in
the story line. The report opens each model's section with a summary (the curves and the
assessment), then the disagreement, then the story line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from stats.config import DEFAULTS
from stats.results import Results, record
from stats.units import BOUND_SIGN, format_number, format_tokens

#: A rise of at most this many heads is "few heads": its fitted t50 rests on single heads switching.
FEW_HEADS = 5


def _side(ratio, bound) -> Optional[str]:
    """">1" / "<1" when the gap says on which side of 1 it lies (a bound: only on its own side), else None."""
    if ratio is None or not np.isfinite(ratio) or ratio == 1:
        return None
    side = ">1" if ratio > 1 else "<1"
    return side if not bound or side == {"lower": ">1", "upper": "<1"}.get(bound) else None


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


def interval_text(ci, fmt=format_tokens, empty: str = "-") -> str:
    """An interval ``[lo, hi]`` of tokens (or in ``fmt``), an open end (None) written ``-``; ``empty``
    when it has no end at all."""
    if not ci or (ci[0] is None and ci[1] is None):
        return empty
    return f"[{fmt(ci[0])}, {fmt(ci[1])}]"


def _ratio_ci(ci) -> str:
    return interval_text(ci, format_number, "[-]")


def describe_time(ca) -> str:
    """One clause on a curve's transition time: its t50 and interval, or its bound."""
    if ca is None:
        return "no curve"
    t = ca.times
    if ca.censored == "left":
        return f"{ca.head_class} at or before {format_tokens(t.t50)} (left-censored)"
    if ca.censored == "right":
        return f"{ca.head_class} not before {format_tokens(t.t50)} (right-censored)"
    if t is None:
        return f"{ca.head_class}: no transition ({ca.verdict.reason.split(':')[0]})"
    return f"{ca.head_class} at ~{format_tokens(t.t50)} {interval_text(t.t50_ci)} ({ca.verdict.shape})"


def describe_gap(g) -> str:
    """The fitted gap in words: its ratio (a bound marked ``>=`` / ``<=``), interval and p-value."""
    if g is None or g.ratio is None or not np.isfinite(g.ratio):
        return "no fitted gap"
    sign = BOUND_SIGN.get(g.bound, "")
    p = "" if g.p_value is None or not np.isfinite(g.p_value) else f", p = {g.p_value:.3g}"
    return f"gap {sign}{g.ratio:.3g}x {_ratio_ci(g.ratio_ci)}{p}"


def describe_milestone_gap(m) -> str:
    """The milestone gap in words: a point with its bracket where both milestones are reached, else
    the bound the last revision gives (``>= 1.43x``, the late milestone not reached), never a point."""
    name = f"milestone gap {m.late.name} / {m.early.name}"
    if not m.early.reached:
        upper = "" if m.ratio_ci[1] is None else f" (<= {m.ratio_ci[1]:.3g}x)"
        return f"{name}: no ratio, {m.early.name} not reached by {format_tokens(m.early.last_tokens)}{upper}"
    if not m.late.reached:
        lower = "" if m.ratio_ci[0] is None else f">= {m.ratio_ci[0]:.3g}x, "
        return f"{name} {lower}a bound: {m.late.name} not reached by {format_tokens(m.late.last_tokens)}"
    return f"{name} {m.ratio:.3g}x {_ratio_ci(m.ratio_ci)}"


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
    #: the direction the evidence establishes (:func:`weigh`): ``>1`` (late after early), ``<1``
    #: (late before early), or None (not established)
    established: Optional[str] = None
    #: one sentence on the gap: the direction and what establishes it, or why it is not established
    assessment: Optional[str] = None
    late_class: Optional[str] = None
    early_class: Optional[str] = None

    def warning(self, short: bool = False) -> Optional[str]:
        """The disagreement line of the model's section, or None: the two gaps disagree, why, and which
        figure to trust, or that the gap is not established (``short``: without the assessment, which the
        report's summary gives just above)."""
        if self.agree is not False:
            return None
        why = "; ".join(self.reasons) or "no reason found in the data"
        advice = (f"Trust: {self.trust}" if self.trust
                  else "Trust neither: the gap is not established" + ("" if short else f" ({self.assessment})"))
        return f"The fitted and the milestone gap disagree in {self.disagreement} ({why}). {advice}"

    def to_dict(self) -> dict:
        """The record, with the :meth:`warning` line (and its short form, ``disagreement_line``) last."""
        return record(self) | {"warning": self.warning(), "disagreement_line": self.warning(short=True)}

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
        if m.reached and m.previous_revision is None:
            out.append(f"censoring: milestone {m.name!r} is met at the first revision")
        elif not m.reached:
            out.append(f"censoring: milestone {m.name!r} is not reached by the last revision")
    return out


def gap_story(model: str, fitted, milestone, late, early, min_points: int = DEFAULTS.shape.min_points,
              min_rise_heads: float = DEFAULTS.shape.min_rise_heads) -> GapStory:
    """The :class:`GapStory` of ``model`` from its fitted gap (:class:`stats.times.GapRatio`),
    its milestone gap (:class:`stats.milestones.MilestoneGap`) and the two curve analyses."""
    text = f"{describe_time(early)}, {describe_time(late)}: {describe_gap(fitted)}"
    if milestone is not None:
        text += f"; {describe_milestone_gap(milestone)}"
    story = GapStory(model, text, None if fitted is None else fitted.to_dict(),
                     None if milestone is None else milestone.to_dict(),
                     late_class=None if late is None else late.head_class,
                     early_class=None if early is None else early.head_class)
    if fitted is not None and milestone is not None:
        f_side = _side(fitted.ratio, fitted.bound)
        m_side = _side(milestone.ratio, milestone.bound)
        if f_side and m_side and f_side != m_side:
            story.agree, story.disagreement = False, "direction"
        elif _overlap(fitted.ratio_ci, milestone.ratio_ci) is False:
            story.agree, story.disagreement = False, "size"
        elif f_side and m_side:
            story.agree = True
        story.reasons = _reasons([late, early], [milestone.late, milestone.early], min_points, min_rise_heads)
    return weigh(story)


# ---------------------------------------------------------------------------------
# Weighing the evidence: which direction, if any, the gaps establish
# ---------------------------------------------------------------------------------


def _excludes_one(ci) -> Optional[str]:
    """``>1`` / ``<1`` when the interval ``[lo, hi]`` (None: open) lies on that side of 1, else None."""
    lo, hi = (list(ci) + [None, None])[:2] if ci else (None, None)
    if lo is not None and np.isfinite(lo) and lo > 1:
        return ">1"
    if hi is not None and np.isfinite(hi) and hi < 1:
        return "<1"
    return None


_OPPOSITE = {">1": "<1", "<1": ">1"}


def _direction(side: str, late: str, early: str) -> str:
    return f"{late} after {early}" if side == ">1" else f"{late} before {early}"


def _ratio_text(ratio, ci, bound) -> str:
    sign = BOUND_SIGN.get(bound, "")
    value = "-" if ratio is None or not np.isfinite(ratio) else f"{sign}{ratio:.3g}"
    return f"{value} {_ratio_ci(ci)}"


def informative(row) -> bool:
    """Whether a sensitivity row says anything on the gap: a gap ratio, and a class that has a transition
    at the row's threshold (not no head at all, not every head at every revision)."""
    ratio = row.gap_ratio
    return (ratio is not None and bool(np.isfinite(ratio)) and bool(row.max_fraction)
            and not (row.min_fraction is not None and row.min_fraction >= 1))


def _row_evidence(rows) -> list:
    """``(text, established side, side of the point)`` of each sensitivity row whose re-counted class
    forms (a row whose class has no head at its threshold says nothing on the gap)."""
    return [(f"{r.head_class} at {r.threshold_text}: {_ratio_text(r.gap_ratio, r.gap_ratio_ci, r.gap_bound)}",
             _excludes_one(r.gap_ratio_ci), _side(r.gap_ratio, r.gap_bound))
            for r in rows if not r.is_analysis_threshold and informative(r)]


def weigh(story: GapStory, rows=()) -> GapStory:
    """Set the story's :attr:`~GapStory.established` direction, :attr:`~GapStory.assessment` and
    :attr:`~GapStory.trust` from its fitted gap, its milestone gap and the model's threshold-sensitivity
    ``rows`` (:class:`stats.sensitivity.SensitivityRow`, the main analysis's rows left out), by the rule
    of the module docstring (a milestone bound neither establishes a direction nor is trusted)."""
    late, early = story.late_class or "late", story.early_class or "early"
    f, m = story.fitted or {}, story.milestone or {}
    f_est = _excludes_one(f.get("ratio_ci")) if f.get("ratio") is not None else None
    f_lean = _side(f.get("ratio"), f.get("bound"))
    m_point = bool(m) and m.get("bound") is None and m.get("ratio") is not None
    m_est = _excludes_one(m.get("ratio_ci")) if m_point else None
    m_lean = _side(m.get("ratio"), None) if m_point else None
    row_ev = _row_evidence(rows)
    sides = {s for s in (f_est, m_est) if s}
    side = sides.pop() if len(sides) == 1 else None
    against = [] if side is None else _against(side, f_est, f_lean, m_est, m_lean, row_ev, f, m)
    story.established = side if side and not against else None
    notes = _milestone_bound_note(m)
    if story.established:
        support = ([f"the fitted interval {_ratio_ci(f.get('ratio_ci'))} excludes 1"] if f_est == side else []) + \
                  ([f"the milestone bracket {_ratio_ci(m.get('ratio_ci'))} excludes 1"] if m_est == side else [])
        agreeing = sum(1 for _, _, lean in row_ev if lean == side)
        if row_ev:
            support.append(f"{agreeing} of {len(row_ev)} other thresholds give a ratio on the same side")
        caveats = [t for t, _, lean in row_ev if lean == _OPPOSITE[side]]
        story.assessment = (f"The gap is established: {_direction(side, late, early)} ({'; '.join(support)})"
                            + (f"; not at every threshold: {'; '.join(caveats)}" if caveats else "") + "."
                            + (f" {notes}" if notes else ""))
        trusted = [name for name, est in (("the fitted gap", f_est), ("the milestone gap", m_est)) if est == side]
        story.trust = " and ".join(trusted) + (f". {notes}" if notes else "")
        return story
    why = _not_established(side, against, f, f_est, m, m_est, row_ev, late, early)
    story.assessment = f"The gap is not established: {'; '.join(why)}." + (f" {notes}" if notes else "")
    story.trust = None
    return story


def _against(side, f_est, f_lean, m_est, m_lean, row_ev, f, m) -> list:
    """What points away from ``side``: an interval excluding 1 on the other side, or a point there."""
    opp = _OPPOSITE[side]
    out = []
    if f_est == opp or (f_est is None and f_lean == opp):
        out.append(f"the fitted gap {_ratio_text(f.get('ratio'), f.get('ratio_ci'), f.get('bound'))} points the other way")
    if m_est == opp or (m_est is None and m_lean == opp):
        out.append(f"the milestone gap {_ratio_text(m.get('ratio'), m.get('ratio_ci'), None)} points the other way")
    out += [f"{t} excludes 1 on the other side" for t, est, _ in row_ev if est == opp]
    return out


def _not_established(side, against, f, f_est, m, m_est, row_ev, late, early) -> list:
    """Why no direction is established, one clause a reason."""
    if side is not None:
        by = "the fitted interval" if f_est == side else "the milestone bracket"
        return [f"{_direction(side, late, early)} by {by}, but {'; '.join(against)}"]
    why = []
    if f_est and m_est and f_est != m_est:
        why.append(f"the fitted interval {_ratio_ci(f.get('ratio_ci'))} and the milestone bracket "
                   f"{_ratio_ci(m.get('ratio_ci'))} exclude 1 on opposite sides")
    if f.get("ratio") is None:
        why.append("no fitted gap")
    elif not f_est:
        why.append(f"the fitted gap {_ratio_text(f.get('ratio'), f.get('ratio_ci'), f.get('bound'))} does not exclude 1")
    if m and m.get("bound") is None and m.get("ratio") is not None and not m_est:
        why.append(f"the milestone bracket {_ratio_ci(m.get('ratio_ci'))} contains 1")
    if len({lean for _, _, lean in row_ev if lean}) > 1:
        why.append("the other thresholds give ratios on both sides of 1 (" + "; ".join(t for t, _, _ in row_ev) + ")")
    return why


def _milestone_bound_note(m: dict) -> str:
    """A sentence on a milestone gap that is a bound (a milestone never reached), or ''."""
    if not m or m.get("bound") is None and m.get("ratio") is not None:
        return ""
    late, early = m.get("late_milestone"), m.get("early_milestone")
    if m.get("bound") == "lower":
        return (f"The milestone gap is a lower bound, not a figure: {late} is not reached by the last revision "
                f"(if it is reached later, the gap is >= {m['ratio_ci'][0]:.3g}x).")
    return f"The milestone gap has no figure: {early} is not reached by the last revision."


def weigh_stories(stories, sensitivity) -> None:
    """:func:`weigh` each story again with its model's threshold-sensitivity rows (once the table exists)."""
    rows = [] if sensitivity is None else sensitivity.rows
    for story in stories:
        weigh(story, [r for r in rows if r.model == story.model])
