"""Censoring: a rise whose midpoint lies outside the screened revisions.

A class that formed before the first screened revision ``t_1`` shows no rise, or only its
end; one not formed by the last, ``t_m``, none, or only its start. A sigmoid fitted as if
the transition were inside the range gives a meaningless midpoint, so the analysis first
decides on which side, if any, the rise's midpoint t50 lies (:class:`Censoring`) and
reports it as a bound:

- ``left``: ``t50 <= t_1``. No rise inside the range (no change against noise,
  :mod:`stats.change`, or a rise below ``min_rise_heads`` heads) with the class present at
  the first revision; or a fitted logistic midpoint before ``t_1``; or, for followed heads
  with step 0, most of the rise's heads off before training and on from the first revision
  (:func:`censoring_from_heads`).
- ``right``: ``t50 > t_m``. No rise and the class never present, or a fitted midpoint
  after ``t_m``.

A logistic's midpoint outside the range does not censor a followed-heads rise that the heads
show whole (:func:`stats.curve_analysis._heads_seen_whole`: heads switching inside the range,
none arriving at its end, and against ``left`` step 0 known): its t50 is the median head's.

"Present" is judged by regime (:mod:`stats.shape`), at the start and at the end of
the screened range, against a floor:

- identity known, with the heads' flags: *settled* heads (:mod:`stats.switching`) not
  flagged at step 0 (those are background, :attr:`Curve.background`; without step 0, heads
  on from the first revision count, as formed before it and on by construction cannot be
  told apart), at the end, and at the start on the flags read backwards; a head that
  flickers throughout is no class member. The floor is ``min_rise_heads``. Without flags,
  the unimodal fit's level in heads (:mod:`stats.phases`);
- aggregate counts (independent draws): the unimodal fit's level, against
  ``max(min_rise_heads, background_share x n)``: below that share a level cannot be
  told from a background of heads that pass the threshold by chance.

Present at the start: ``left``. Otherwise ``right``: without evidence of change the end
is not told from the start, so heads present at the end only are at most the start of a
rise (a change at the last revision alone is reported as such first, :mod:`stats.change`).
One case has no side (``side`` None, no bound): aggregate counts whose level, the same
throughout, lies between ``min_rise_heads`` and the background floor (a class formed
before the range and a chance background read the same).

A censored curve's verdict is ``none`` with the side in its reason, its times are the
bound (:func:`stats.times.censored_times`), and a gap ratio with a censored side is a
one-sided bound with a one-sided test (:func:`stats.times.gap_ratio`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from stats.change import test_label
from stats.head_times import head_draws
from stats.hypotheses import TestResult
from stats.phases import CurvePhases
from stats.results import Results
from stats.switching import SETTLED_REVISIONS, settled_at_end, switch_on
from stats.tracked import Curve

@dataclass
class Censoring(Results):
    """On which side of the screened range a curve's rise midpoint lies (``side`` None: the
    curve shows no rise and the side cannot be told), and why."""

    side: Optional[str]
    reason: str
    #: the tokens that bound t50 (None: the first revision for ``left``, the last for ``right``)
    bound_tokens: Optional[float] = None

    def bound(self, tokens) -> float:
        """The tokens that bound t50 on a curve's ``tokens`` (by default the first revision's for
        ``left``, the last one's for ``right``)."""
        return float(tokens[0 if self.side == "left" else -1] if self.bound_tokens is None else self.bound_tokens)


def _heads(v: float) -> str:
    return f"{v:.3g} head" + ("" if abs(v - 1) < 1e-9 else "s")


def presence(curve: Curve, phases: CurvePhases) -> tuple:
    """(at the start, at the end, what): the class's heads present at the first and at the
    last revisions (module docstring)."""
    if curve.flags is not None and len(curve) >= SETTLED_REVISIONS:
        member = ~curve.background
        start = (settled_at_end(curve.flags[::-1]) & member).sum()
        end = (settled_at_end(curve.flags) & member).sum()
        bg = "" if member.all() else f"; not counting the {(~member).sum()} heads flagged at step 0, before any training"
        return float(start), float(end), f"settled (on at every revision since it switched on, at least two{bg})"
    n_ref = float(np.median(curve.n))
    return float(phases.fit[0]) * n_ref, float(phases.fit[-1]) * n_ref, "in the unimodal fit"


def censoring_without_rise(curve: Curve, phases: CurvePhases, change: TestResult, min_rise_heads: float,
                           alpha: float, regime: str, background_share: float) -> Optional[Censoring]:
    """The censoring of a curve that shows no rise inside the range; None when it shows a rise.
    ``change``: the curve's test of change (:mod:`stats.change`)."""
    p_change = change.p_value
    n_ref = float(np.median(curve.n))
    rise = phases.fit[: phases.rise_end]
    rise_heads = float(rise.max() - rise[0]) * n_ref
    if rise_heads >= min_rise_heads - 1e-9 and p_change <= alpha:
        return None
    start, end, what = presence(curve, phases)
    floor = max(min_rise_heads, background_share * n_ref if regime == "aggregate" else 0.0)
    first, last = curve.revisions[0], curve.revisions[-1]
    why = (f"no evidence of change against noise ({test_label(change)} p = {p_change:.3g} > {alpha})"
           if p_change > alpha else f"a rise of {_heads(rise_heads)} < min_rise_heads {min_rise_heads:g}")
    if start >= floor - 1e-9:
        tail = f"; then {phases.decline.describe()}" if phases.decline is not None else ""
        return Censoring("left", f"left-censored: {_heads(start)} {what} at the first revision ({first}) and {why}: "
                                 f"the class formed at or before it (t50 <= {first}){tail}")
    bg = (f" (below the background floor, {background_share:g} of the heads, that aggregate counts cannot tell "
          "from heads passing the threshold by chance)" if floor > min_rise_heads else "")
    level = float(np.mean(curve.fraction)) * n_ref  # no change: the level is the mean
    if level >= min_rise_heads - 1e-9 and floor > min_rise_heads and p_change > alpha:
        return Censoring(None, f"no transition inside the range and no side: a level of {_heads(level)} on average{bg} "
                               f"and {why}: formed at or before {first}, or a background that has not formed by {last}; "
                               "no bound")
    if end < floor - 1e-9:
        return Censoring("right", f"right-censored: {_heads(end)} {what} at the last revisions{bg} and {why}: not "
                                  f"formed by the last revision ({last}; t50 > {last})")
    return Censoring("right", f"right-censored: {_heads(start)} {what} at the first revision{bg}, and the "
                              f"{_heads(end)} at the last are not told from that ({why}): at most the start of a rise, "
                              f"not formed by the last revision ({last}; t50 > {last})")


def censoring_from_fit(curve: Curve, log10_t50: float, draws=None, level: float = 0.95) -> Optional[Censoring]:
    """Censoring of a curve with a rise whose fitted logistic midpoint (log10 tokens) lies
    outside the screened range; None when inside. With the midpoint's bootstrap ``draws`` (log10
    tokens) the bound is the one-sided ``level`` limit where that reaches into the range (a
    midpoint fitted just before the first revision may lie in the first interval): ``t50 <=
    max(t_1, upper limit)`` or ``t50 > min(t_m, lower limit)``."""
    x = np.log10(curve.tokens)
    if x[0] <= log10_t50 <= x[-1]:
        return None
    left = log10_t50 < x[0]
    side, end, rev = ("left", x[0], curve.revisions[0]) if left else ("right", x[-1], curve.revisions[-1])
    where, seen, rel = ("before the first", "end", "<=") if left else ("after the last", "start", ">")
    head = f"{side}-censored: the fitted midpoint lies {where} revision ({rev}); only the {seen} of the rise is seen"
    limit = None if draws is None else float(np.quantile(draws, level if left else 1 - level))
    first = None if left else _first_switch_before(curve)
    if first is not None and (limit is None or x[first[0]] > limit):  # the heads bound it more tightly
        j, rev_j = first
        return Censoring(side, f"{head} (t50 > {rev_j}: no head of the rise switched on before it, the first "
                               "settling after it)", bound_tokens=float(10**x[j]))
    if limit is not None and (limit > end if left else limit < end):
        bound = min(limit, x[-1]) if left else max(limit, x[0])
        return Censoring(side, f"{head} (t50 {rel} {10**limit:.3g} tokens, the {'upper' if left else 'lower'} "
                               f"{level:.0%} limit of its bootstrap)", bound_tokens=float(10**bound))
    return Censoring(side, f"{head} (t50 {rel} {rev})")


def censoring_from_heads(curve: Curve, n_boot: int, rng: np.random.Generator, level: float = 0.95) -> Optional[Censoring]:
    """Left censoring read from the followed heads: with step 0 known, a head off then and on,
    settled, from the first revision switched on before it. When such heads are more than half of
    the heads settled by the curve's end, the median head (the t50, :mod:`stats.head_times`)
    switched on before the range: ``t50 <= t_1``, whatever a logistic through the counts says (it
    takes the first count for its floor). The bound is the heads' bootstrap's one-sided ``level``
    limit where that reaches into the range. None without step 0 (heads may be on by
    construction) or with half the heads or fewer on from the first revision; the caller leaves
    out a rise still under way at its end (heads to come move the median later)."""
    if curve.flags is None or curve.flags_at_init is None:
        return None
    j = switch_on(curve.trained_flags)
    j = j[j >= 0]
    before = int(np.sum(j == 0))
    if before <= j.size / 2:
        return None
    x = curve.x
    intervals = np.column_stack([x[np.maximum(j - 1, 0)], x[j]])
    limit = float(np.quantile(head_draws(intervals, n_boot, rng)["t50"][2], level))
    rev = curve.revisions[0]
    where = f"t50 <= {rev}" if limit <= x[0] else f"t50 <= {10**limit:.3g} tokens, the upper {level:.0%} limit of its bootstrap"
    return Censoring("left", f"left-censored: {before} of the {j.size} heads of the rise (off before training) are on "
                             f"from the first revision ({rev}): the median head switched on before it; only the end of "
                             f"the rise is seen ({where})", bound_tokens=None if limit <= x[0] else float(10**limit))


def _first_switch_before(curve: Curve) -> Optional[tuple]:
    """The index and revision before the first settled switch-on after the first revision (heads on
    before training or at the first revision left out): the rise's midpoint, its median head's
    switch-on, comes no earlier. None without the heads' flags or such a switch-on."""
    if curve.flags is None:
        return None
    j = switch_on(curve.trained_flags)
    j = j[j > 0]
    if j.size == 0:
        return None
    i = int(j.min()) - 1
    return i, curve.revisions[i]
