"""Censoring: a rise whose midpoint lies outside the screened revisions.

Screens see a model only at its screened revisions ``t_1 < ... < t_m``. A class
that formed before ``t_1`` shows no rise (its count is at its plateau from the
first revision, or only falls); one that has not formed by ``t_m`` shows none
either (its count stays near zero), or only the start of one. Fitting a sigmoid
to such a curve as if the transition were inside the range gives a meaningless
midpoint, so the analysis first decides on which side, if any, the rise's
midpoint t50 lies (:class:`Censoring`), and then reports it as a bound:

- ``left``: ``t50 <= t_1``. Either no rise inside the range (no monotone change
  against noise, :func:`stats.shape.level_change_test`, or a rise below
  ``min_rise_heads`` heads) while the class is already present at the first
  revision; or a rise whose fitted logistic midpoint lies before ``t_1`` (only the
  end of the rise is seen); or, for followed heads with step 0, a rise most of whose
  heads were off before training and are on from the first revision: its median head
  switched on before ``t_1`` (:func:`censoring_from_heads`).
- ``right``: ``t50 > t_m``. Either no rise and the class never present (nothing
  has formed by the last revision), or a rise whose fitted midpoint lies after
  ``t_m`` (only the start of the rise is seen).

A logistic's midpoint outside the range does not censor a followed-heads rise that the heads
show whole (:func:`stats.curve_analysis._heads_seen_whole`: heads switching inside the range,
none arriving at its end, and against ``left`` step 0 known): its t50 is the median head's.

"Present" is judged by regime (:mod:`stats.shape`), at the start and at the end of
the screened range, against a floor:

- identity known, with the heads' flags: *settled* heads that were not flagged at step 0
  (a head flagged at 0 tokens, before any training, is background: :attr:`Curve.background`;
  without a step 0 revision heads flagged from the first revision are counted, as formed
  before it or on by construction cannot be told apart) (:mod:`stats.switching`: a head's
  switch-on from its own flags, settled when at least two revisions follow it and its run
  since is not what its own on-rate before would give by chance), at the end, and at the
  start on the flags read backwards: persistence is counted on the grid there is, not in
  revisions the study does not have (a head that switches on between the 3rd and 4th of 6
  revisions and stays is settled), and a head near the threshold that flickers on and off
  throughout is no class member. The floor is ``min_rise_heads``. Without flags, the
  unimodal fit's level in heads (:mod:`stats.phases`);
- aggregate counts (independent draws): the unimodal fit's level, against
  ``max(min_rise_heads, background_share x n)``: below that share a level cannot be
  told from a background of heads that pass the threshold by chance.

Present at the start: ``left``. Otherwise ``right``: without evidence of change
the state at the end is not told from the state at the start, so heads present at
the end only are at most the start of a rise (a change seen at the last revision
alone is reported as such before censoring, :mod:`stats.change`). At the end means
the last revisions (settled heads; otherwise the unimodal fit's last level). One case
has no side: aggregate counts whose level, the same throughout, lies between
``min_rise_heads`` and the background floor: a class formed before the first revision
and a background of heads passing the threshold by chance read the same, so the
analysis says so and gives no bound (``side`` None).

A censored curve's shape verdict is ``none`` (no transition inside the range; the
reason says on which side it lies), its times are the bound
(:func:`stats.times.censored_times`), and a gap ratio with a censored side is a
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

SIDES = ("left", "right")


@dataclass
class Censoring(Results):
    """On which side of the screened range a curve's rise midpoint lies (``side`` None: the
    curve shows no rise and the side cannot be told), and why."""

    side: Optional[str]
    reason: str
    #: the tokens that bound t50 (None: the first revision for ``left``, the last for ``right``)
    bound_tokens: Optional[float] = None

    def __post_init__(self):
        if self.side not in SIDES + (None,):
            raise ValueError(f"censoring side {self.side!r}: valid {SIDES} or None")

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
    """Left censoring read from the followed heads themselves: where their flags before training
    (step 0) are known, a head off then and on, settled, from the first revision switched on before
    it. When such heads are more than half of the heads switched on (settled) by the curve's end,
    the rise's median head, its t50 (:mod:`stats.head_times`), switched on before the first
    revision: ``t50 <= t_1``, whatever a logistic fitted to the counts seen says (it takes the first
    revision's count for its floor, and puts the midpoint inside the range). The bound is the
    one-sided ``level`` limit of the heads' bootstrap (heads resampled; one before the range counts
    at ``t_1``) where that reaches into the range. None without step 0 (heads on from the first
    revision may be on by construction), or with half the heads or fewer on from the first
    revision; the caller leaves out a rise still under way at its end (heads to come move the
    median later)."""
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
    """Where the followed heads bound the midpoint of a rise still under way from below: the index and
    revision before the first settled switch-on after the first revision (heads on before training,
    and heads on at the first revision, the rise's floor, left out). The rise's midpoint is its
    median head's switch-on, which no earlier than the first head's; None without the heads' flags
    or a switch-on inside the range."""
    if curve.flags is None:
        return None
    j = switch_on(curve.trained_flags)
    j = j[j > 0]
    if j.size == 0:
        return None
    i = int(j.min()) - 1
    return i, curve.revisions[i]
