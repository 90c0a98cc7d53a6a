"""Phases of a curve: its rise, its peak, and a decline after the peak.

A head class forms during training: its count rises. It can fall again later,
when heads are reclassified as another class grows (induction heads that turn into
sinks), so a curve may rise and then partly decline. The fits and the verdict are
about the *rise*: a monotone model fitted across a rise and a decline places its
midpoint between them, and a falling fit says nothing about formation. This module
finds where the rise ends.

Unimodal fit. With weights ``w_j = n_j`` and fractions ``y_j = k_j / n_j``, the
unimodal least-squares fit is non-decreasing up to a mode and non-increasing after
it: for every split ``c`` the non-decreasing fit of ``y_1..y_c`` and the
non-increasing fit of ``y_{c+1}..y_m`` (pool-adjacent-violators,
:func:`stats.shape.isotonic_fit`), the split with the least weighted squared error
kept. Its maximum is the *peak* ``P``; the *rise* is revisions ``1..r``, ``r`` the
last revision at the peak level; the *later level* ``L`` is the fit at the last
revision and the *drop* ``P - L``.

A decline is reported (and the rise alone is fitted) when it is material and real:

- material: the drop is at least ``min_rise_heads`` heads (x the median ``n``) and
  at least ``min_decline_share`` of the peak (the rise's amplitude above a zero
  floor: a class's count starts near zero at initialisation), so that the noise of
  a curve at its plateau is not a decline;
- real: H0 "non-decreasing" is tested with ``T = SS_increasing - SS_unimodal >= 0``,
  referred to ``n_perm`` residual permutations around the non-decreasing fit, and
  rejected at ``alpha``. Permuting residuals assumes exchangeable noise around the
  curve: the sampling noise of independent draws (aggregate curves), and the
  flicker of single heads near the threshold when the same heads are followed
  (the assumption of :func:`stats.shape.level_change_test`). With ten revisions a
  decline of one or two heads of a small circuit is not told from flicker.

Assumptions stated: the transition of interest is a rise (a class's count starts
near zero at initialisation); one peak (a second rise after a decline is reported
as part of the decline).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from stats.shape import isotonic_fit

#: Residual permutations of the decline test (at most; fewer when ``n_perm`` is smaller).
DECLINE_PERMUTATIONS = 999


def _weighted_ss(y, w, fit):
    return (w * (y - fit) ** 2).sum(-1)


def unimodal_fit(y, w):
    """Unimodal weighted least-squares fit of rows ``y`` (B, m) with weights ``w``.

    Returns ``(fit, ss, ss_increasing)``: the fits (B, m), their weighted squared
    errors (B,) and those of the non-decreasing fit alone (B,).
    """
    y = np.atleast_2d(np.asarray(y, float))
    w = np.broadcast_to(np.asarray(w, float), y.shape)
    m = y.shape[-1]
    up = isotonic_fit(y, w)
    best_fit, best_ss = up, _weighted_ss(y, w, up)
    ss_up = best_ss.copy()
    for c in range(1, m):  # non-decreasing on [0, c), non-increasing on [c, m)
        left = isotonic_fit(y[:, :c], w[:, :c])
        right = -isotonic_fit(-y[:, c:], w[:, c:])
        fit = np.concatenate([left, right], -1)
        ss = _weighted_ss(y, w, fit)
        better = ss < best_ss - 1e-12
        best_fit = np.where(better[:, None], fit, best_fit)
        best_ss = np.where(better, ss, best_ss)
    return best_fit, best_ss, ss_up


def _prefix_isotonic_ss(y, w) -> np.ndarray:
    """Weighted squared error of the non-decreasing fit of ``y[:c + 1]`` for every ``c``, in one
    pool-adjacent-violators pass (blocks kept as sums ``W, WY, WYY``; a block's error is
    ``WYY - WY^2 / W``)."""
    out = np.empty(len(y))
    stack = []
    total = 0.0
    for i, (wi, yi) in enumerate(zip(w, y)):
        W, WY, WYY = wi, wi * yi, wi * yi * yi
        while stack and stack[-1][1] * W > WY * stack[-1][0]:  # the previous block's mean is higher: pool
            pW, pWY, pWYY = stack.pop()
            total -= pWYY - pWY * pWY / pW if pW > 0 else 0.0
            W, WY, WYY = W + pW, WY + pWY, WYY + pWYY
        stack.append((W, WY, WYY))
        total += WYY - WY * WY / W if W > 0 else 0.0
        out[i] = total
    return out


def unimodal_ss(y, w) -> tuple:
    """``(ss_unimodal, ss_increasing)`` of rows ``y`` (B, m): the errors of :func:`unimodal_fit`
    and of the non-decreasing fit, by prefix and suffix passes (O(m) a row, for permutation
    tests)."""
    y = np.atleast_2d(np.asarray(y, float))
    w = np.broadcast_to(np.asarray(w, float), y.shape)
    if y.shape[-1] <= 12:  # short rows: the vectorised fits over every split are faster
        return unimodal_fit(y, w)[1:]
    ss, ss_up = np.empty(len(y)), np.empty(len(y))
    for b, (yb, wb) in enumerate(zip(y, w)):
        up = _prefix_isotonic_ss(yb, wb)  # up[c]: non-decreasing on [0, c]
        down = _prefix_isotonic_ss(yb[::-1], wb[::-1])  # down[j]: non-increasing on the last j + 1
        m = len(yb)
        splits = up[:-1] + down[: m - 1][::-1]  # non-decreasing on [0, c), non-increasing on [c, m), c = 1 .. m-1
        ss_up[b] = up[-1]
        ss[b] = min(up[-1], float(splits.min())) if m > 1 else up[-1]
    return np.maximum(ss, 0.0), np.maximum(ss_up, 0.0)


def decline_test(k, n, n_perm: int, rng: np.random.Generator) -> float:
    """p-value of H0 "non-decreasing" against a unimodal rise-then-fall (module docstring)."""
    k = np.asarray(k, float)
    n = np.asarray(n, float)
    w = np.where(n > 0, n, 0.0)
    y = k / np.where(n > 0, n, 1)
    ss, ss_up = unimodal_ss(y, w)
    t = float(ss_up[0] - ss[0])
    if t <= 1e-12:
        return 1.0
    null = isotonic_fit(y, w)[0]
    resid = y - null
    idx = rng.permuted(np.tile(np.arange(len(y)), (n_perm, 1)), axis=1)
    y_star = np.clip(null[None, :] + resid[idx], 0.0, 1.0)
    ss_b, ss_up_b = unimodal_ss(y_star, w)
    t_star = ss_up_b - ss_b
    return float((1.0 + np.sum(t_star >= t - 1e-12)) / (n_perm + 1.0))


@dataclass
class Decline:
    """The fall after a curve's peak: the peak, the later level and where it falls."""

    peak: float
    peak_heads: float
    peak_revision: str
    peak_tokens: float
    later: float
    later_heads: float
    drop_heads: float
    #: the drop as a share of the peak
    share: float
    #: revisions between which the fitted level first falls below the peak
    falls_after: list
    p_value: Optional[float] = None

    def describe(self) -> str:
        a, b = self.falls_after
        return (f"peaks at {self.peak_heads:.3g} heads ({self.peak_revision}), falls after {a} -> {b} to "
                f"{self.later_heads:.3g} heads by the last revision (-{self.share:.0%}, p = {self.p_value:.3g})")

    def to_dict(self) -> dict:
        return {"peak": self.peak, "peak_heads": self.peak_heads, "peak_revision": self.peak_revision,
                "peak_tokens": self.peak_tokens, "later": self.later, "later_heads": self.later_heads,
                "drop_heads": self.drop_heads, "share": self.share, "falls_after": self.falls_after,
                "p_value": self.p_value}


@dataclass
class CurvePhases:
    """Where a curve's rise ends (``rise_end``: the rise is revisions ``[0, rise_end)``),
    its unimodal fit, the peak, and the decline when one is reported."""

    fit: np.ndarray
    peak: float
    peak_heads: float
    first_heads: float
    rise_end: int
    decline: Optional[Decline] = None

    @property
    def formed(self) -> bool:
        return self.peak_heads > 0


def curve_phases(curve, min_rise_heads: float, min_decline_share: float, alpha: float, n_perm: int,
                 rng: np.random.Generator) -> CurvePhases:
    """The :class:`CurvePhases` of ``curve`` (rules of the module docstring)."""
    k, n = np.asarray(curve.k, float), np.asarray(curve.n, float)
    y = k / np.where(n > 0, n, 1)
    n_ref = float(np.median(n))
    fit = unimodal_fit(y, np.where(n > 0, n, 0.0))[0][0]
    peak = float(fit.max())
    at_peak = np.flatnonzero(fit >= peak - 1e-12)
    last_peak = int(at_peak[-1])
    phases = CurvePhases(fit, peak, peak * n_ref, float(fit[0]) * n_ref, len(y))
    if last_peak == len(y) - 1:
        return phases
    later = float(fit[-1])
    drop = peak - later
    if drop * n_ref < min_rise_heads - 1e-9 or drop < min_decline_share * peak - 1e-12:
        return phases
    p_value = decline_test(k, n, min(n_perm, DECLINE_PERMUTATIONS), rng)
    if p_value > alpha:
        return phases
    revs, tok = curve.revisions, curve.tokens
    decline = Decline(peak, peak * n_ref, str(revs[last_peak]), float(tok[last_peak]), later, later * n_ref,
                      drop * n_ref, drop / peak, [str(revs[last_peak]), str(revs[last_peak + 1])], p_value)
    phases.rise_end = last_peak + 1
    phases.decline = decline
    return phases
