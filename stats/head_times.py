"""Transition times of followed heads from their own switch-on times.

Where a per-head table follows the same heads, the class's rise is made of heads that each
switched on once (:mod:`stats.switching`): head ``h`` settled at revision ``j_h >= 1``, so
its switch-on lies in the checkpoint interval ``(x_{j-1}, x_j]`` (log10 tokens), and the
rise's t50 is the median of these times, its onset and saturation their 10th and 90th
percentiles. Heads on from the first revision (``j = 0``) are the level the rise starts
from, not part of it.

Two things are unknown, and the bootstrap carries both: which heads a class has (the
heads are resampled with replacement) and where inside its checkpoint interval the
resampled median (10th, 90th percentile) head switched on: anywhere, drawn uniformly in
log10 tokens inside it, one draw a replicate (the heads of a sharp rise switch on together,
so their positions are not independent draws: the interval, not the count, limits what the
checkpoints tell). The interval runs from the lower percentile of the replicates' interval
starts to the upper percentile of their ends: where all heads switch inside one checkpoint
interval, that interval.

The logistic's parametric bootstrap (:mod:`stats.times`) draws each revision's count
afresh (binomial), the noise of counts of fresh draws; counts of followed heads are
cumulative (a head on stays on), and the logistic interpolates inside a checkpoint interval
by its shape. Neither interval is right under the other's assumptions, so
:func:`with_head_times` keeps both: the interval is the union of the two, and the draws
that gap ratios pair are a half-and-half mixture (each replicate from one or the other, at
random). The logistic's point estimates stand, and the logistic still decides whether the
midpoint lies inside the range (:mod:`stats.censoring`) and gives the width
(:mod:`stats.width`).
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import numpy as np

from stats.switching import switch_on

#: Fewer switching heads than this: the logistic's times stand.
MIN_HEADS = 2


def switch_intervals(flags, tokens) -> Optional[np.ndarray]:
    """The log10-token intervals ``(lo, hi]`` of the switch-on of each head that switched on inside
    the range (an ``(h, 2)`` array), or None with fewer than :data:`MIN_HEADS`."""
    j = switch_on(flags)
    j = j[j >= 1]
    if j.size < MIN_HEADS:
        return None
    x = np.log10(np.asarray(tokens, float))
    return np.column_stack([x[j - 1], x[j]])


def head_draws(intervals: np.ndarray, n_boot: int, rng: np.random.Generator) -> dict:
    """Bootstrap draws (module docstring) of log10 ``t50``, ``onset`` (10 %) and ``saturation`` (90 %):
    ``{name: (draws, starts, ends)}``, the draw and the bounds of its checkpoint interval a replicate."""
    h = intervals.shape[0]
    intervals = intervals[np.lexsort((intervals[:, 0], intervals[:, 1]))]  # in time order
    ranked = np.sort(rng.integers(0, h, (n_boot, h)), axis=1)  # a resample's heads, in time order
    out = {}
    for name, q in (("onset", 0.1), ("t50", 0.5), ("saturation", 0.9)):
        at = ranked[:, int(np.clip(np.ceil(q * h) - 1, 0, h - 1))]
        lo, hi = intervals[at, 0], intervals[at, 1]
        out[name] = (lo + (hi - lo) * rng.random(n_boot), lo, hi)
    return out


def _union(ci: list, lo: float, hi: float) -> list:
    """The union of an interval (ends in tokens; None: open) and ``[lo, hi]``."""
    a, b = ci
    return [None if a is None else float(min(a, lo)), None if b is None else float(max(b, hi))]


def with_head_times(times, flags, tokens, n_boot: int, rng: np.random.Generator):
    """``times`` (:class:`stats.times.TransitionTimes` of a rise inside the range) with the intervals and
    draws of onset, t50 and saturation widened by the heads' own switch-on times (module docstring);
    unchanged with fewer than :data:`MIN_HEADS` switching heads or without bootstrap draws."""
    intervals = switch_intervals(flags, tokens)
    if intervals is None or times.draws_t50 is None:
        return times
    d = head_draws(intervals, len(times.draws_t50), rng)
    a = (1 - times.level) / 2
    ci = {k: _union(getattr(times, f"{k}_ci"), 10 ** np.quantile(v[1], a), 10 ** np.quantile(v[2], 1 - a))
          for k, v in d.items()}
    mix = rng.random(len(times.draws_t50)) < 0.5
    draws_onset = None if times.draws_onset is None else np.where(mix, d["onset"][0], times.draws_onset)
    note = (f"intervals hold the {len(intervals)} heads' own switch-on times (each inside its checkpoint interval; "
            "heads resampled) as well as the logistic's bootstrap")
    return dataclasses.replace(times, onset_ci=ci["onset"], t50_ci=ci["t50"], saturation_ci=ci["saturation"],
                               draws_t50=np.where(mix, d["t50"][0], times.draws_t50), draws_onset=draws_onset,
                               notes=list(times.notes) + [note])
