"""Transition times of followed heads from their own switch-on times.

Where a per-head table follows the same heads, the class's rise is made of heads that each
switched on once (:mod:`stats.switching`): head ``h`` settled at revision ``j_h >= 1``, so
its switch-on lies in the checkpoint interval ``(x_{j-1}, x_j]`` (log10 tokens), and the
rise's t50 is the median of these times, its onset and saturation their 10th and 90th
percentiles (interpolated between neighbouring heads, :func:`head_draws`). Heads on from the
first revision (``j = 0``) are the level the rise starts from, not part of it.

Two things are unknown, and the bootstrap carries both: which heads a class has (the heads are
resampled with replacement) and where inside its checkpoint interval the resampled median (10th,
90th percentile) head switched on: anywhere, drawn uniformly in log10 tokens inside it, one draw
a replicate, shared by the two heads a percentile falls between (the heads of a sharp rise
switch on together, so their positions are not independent draws: the interval, not the count,
limits what the checkpoints tell). The interval runs from the lower percentile of the
replicates' interval starts to the upper percentile of their ends: where all heads switch inside
one checkpoint interval, that interval.

The logistic's parametric bootstrap (:mod:`stats.times`) draws each revision's count
afresh (binomial), the noise of counts of fresh draws; counts of followed heads are
cumulative (a head on stays on), and their noise is the heads' own: which heads switch,
and where inside its checkpoint interval each did. Where at least :data:`MIN_HEADS` heads
switch on inside the range, :func:`with_head_times` therefore takes the times and the
draws that gap ratios pair from the heads alone: the point estimates are the medians of
the heads' draws, the draws are the heads'. The logistic also fits the heads that are on
from the first revision and any flicker around them, so its midpoint can lie far from the
switching heads' own (a class of three switching heads beside twenty always-on ones:
measured on simulated pairs of classes with equal t50s, draws mixed half from the
logistic rejected ratio 1 in 11 of 104 pairs, heads' draws alone in 4 of 77 where both
classes had them, and found a 5x gap in 63 of 67 pairs against 35 for the mixture). The
interval stays the union of the two (the heads' alone under-cover where the median head's
checkpoint interval is long and few heads switch). The logistic still decides whether the
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


def head_draws(intervals: np.ndarray, n_boot: int, rng: np.random.Generator, n_rise: int = 0) -> dict:
    """Bootstrap draws (module docstring) of log10 ``t50``, ``onset`` (10 %) and ``saturation`` (90 %):
    ``{name: (draws, starts, ends)}``, the draw and the bounds of its checkpoint interval a replicate.
    ``n_rise`` (at least the switching heads): the heads the whole rise holds, those beyond the
    switching ones switching on after the last revision; a replicate whose percentile needs one
    of them draws +inf, its interval ``(inf, inf)`` (the time lies after the range).

    The q-th percentile of ``n`` ranked times is numpy's default (linear): rank ``p = q (n - 1)``,
    between heads ``floor(p)`` and ``floor(p) + 1`` with weight ``p - floor(p)``, in log10 tokens.
    With an even number of heads the median is midway between the two middle heads (the lower of
    them alone would put t50 early: two heads, t50 the first one's time), and onset and saturation
    sit at mirrored ranks."""
    h = intervals.shape[0]
    total = max(h, int(n_rise))
    intervals = intervals[np.lexsort((intervals[:, 0], intervals[:, 1]))]  # in time order
    ranked = np.sort(rng.integers(0, total, (n_boot, total)), axis=1)  # a resample's heads, in time order
    padded = np.vstack([intervals, np.full((total - h + 1, 2), np.inf)])  # heads after the range: (inf, inf)
    out = {}
    for name, q in (("onset", 0.1), ("t50", 0.5), ("saturation", 0.9)):
        p = q * (total - 1)
        i, w = int(np.floor(p)), p - np.floor(p)
        below, above = padded[ranked[:, i]], padded[ranked[:, min(i + 1, total - 1)]]
        with np.errstate(invalid="ignore"):  # inf - inf: the percentile lies after the range
            lo, hi = (below if w == 0 else (1 - w) * below + w * above).T
            draw = np.where(np.isfinite(lo), lo + (hi - lo) * rng.random(n_boot), np.inf)
        out[name] = (draw, lo, hi)
    return out


def with_head_times(times, flags, tokens, n_boot: int, rng: np.random.Generator, n_rise: float = 0.0):
    """``times`` (:class:`stats.times.TransitionTimes` of a rise inside the range) with onset, t50 and
    saturation from the heads' own switch-on times (module docstring): points the medians of the
    heads' draws, draws the heads', intervals the union of the heads' and the logistic's. ``n_rise``:
    the rise's size in heads after the first revision by the logistic (its ceiling less its level at
    the first revision, as the heads on there are not the rise's); where it exceeds the switching heads,
    the rest switch on after the range, and a time whose heads lie there more often than not keeps
    the logistic's, no earlier than the heads switched so far allow (:func:`_floored`). Unchanged with
    fewer than :data:`MIN_HEADS` switching heads or without bootstrap draws."""
    intervals = switch_intervals(flags, tokens)
    if intervals is None or times.draws_t50 is None:
        return times
    d = head_draws(intervals, len(times.draws_t50), rng, int(round(n_rise)))
    a = (1 - times.level) / 2
    new, own, floors, seen = {}, [], [], None
    for k, (draws, lo, hi) in d.items():
        after = np.isinf(draws)  # replicates whose percentile head switches on after the range
        if after.mean() >= 0.5:  # most replicates put this time after the range: the logistic's stands,
            if k != "saturation":  # no earlier than the heads seen put it (heads to come only move it later)
                seen = head_draws(intervals, len(draws), rng) if seen is None else seen
                new |= _floored(times, k, float(np.quantile(seen[k][1], a, method="lower")))
                floors.append(k)
            continue
        if k != "saturation":  # the draws gap ratios pair: a replicate after the range takes the logistic's
            logistic = getattr(times, f"draws_{k}")
            draws = draws if logistic is None else np.where(after, logistic, draws)
            new[f"draws_{k}"] = draws
        start, end = getattr(times, f"{k}_ci")  # the union of the logistic's interval and the heads'
        ci = [None if start is None else float(min(start, 10 ** np.quantile(lo, a, method="lower"))),
              None if end is None else float(max(end, 10 ** np.quantile(hi, 1 - a, method="higher")))]
        new |= {k: float(10 ** np.median(draws)), f"{k}_ci": [c if c is None or np.isfinite(c) else None for c in ci]}
        own.append(k)
    if "t50" not in own + floors:
        return times
    notes = [f"{', '.join(own)} from the {len(intervals)} switching heads' own switch-on times (each inside its "
             "checkpoint interval; heads resampled); intervals also hold the logistic's bootstrap"] if own else []
    if floors:
        notes.append(f"{', '.join(floors)} from the logistic (heads still arriving at the last revision), no earlier "
                     f"than the lower limit of the {len(intervals)} heads switched so far (heads to come move it later)")
    return dataclasses.replace(times, **new, notes=list(times.notes) + notes)


def _floored(times, k: str, floor: float) -> dict:
    """The logistic's time ``k`` of ``times`` (point, interval and draws), no earlier than ``floor`` (log10
    tokens): where most of the heads' replicates put the time after the range, the logistic's midpoint
    through the counts seen may still lie early (a jump at the last revision fits a midpoint long before
    it), while the heads switched so far bound it from below: the lower limit of their own percentile
    (resampled), which heads still to come can only move later."""
    draws = getattr(times, f"draws_{k}")
    lo, hi = getattr(times, f"{k}_ci")
    out = {k: float(max(getattr(times, k), 10**floor)),
           f"{k}_ci": [float(10**floor) if lo is None else float(max(lo, 10**floor)),
                       None if hi is None else float(max(hi, 10**floor))]}
    if draws is not None:
        out[f"draws_{k}"] = np.maximum(draws, floor)
    return out
