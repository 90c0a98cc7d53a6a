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
:func:`stats.isotonic.isotonic_fit`), the split with the least weighted squared error
kept. Its maximum is the *peak* ``P``; the *rise* is revisions ``1..r``, ``r`` the
last revision at the peak level; the *later level* ``L`` is the fit at the last
revision and the *drop* ``P - L``.

A decline is reported (and the rise alone is fitted) when it is material and real:

- material: the drop is at least ``min_rise_heads`` heads (x the median ``n``) and
  at least ``min_decline_share`` of the peak (the rise's amplitude above a zero
  floor: a class's count starts near zero at initialisation), so that the noise of
  a curve at its plateau is not a decline;
- real: H0 "non-decreasing" is tested with ``T = SS_increasing - SS_unimodal >= 0``
  against its distribution under the non-decreasing fit, rejected at ``alpha``: for
  counts that follow the same heads, ``T`` over residual permutations around that
  fit (the flicker of single heads near the threshold as exchangeable noise, the
  assumption of :func:`stats.change.change_test`); for aggregate counts,
  over binomial draws from it (their own sampling noise: permuted residuals of a
  pooled fit understate it, and with 20 revisions called 7.5 % of rising curves a
  decline). With ten revisions a decline of one or two heads of a small circuit is
  not told from flicker.

Assumptions stated: the transition of interest is a rise (a class's count starts
near zero at initialisation); one peak (a second rise after a decline is reported
as part of the decline).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from stats.hypotheses import exceedance_p
from stats.isotonic import isotonic_fit, unimodal_fit, unimodal_ss
from stats.results import Results

#: Residual permutations of the decline test (at most; fewer when ``n_perm`` is smaller).
DECLINE_PERMUTATIONS = 999


def decline_test(k, n, n_perm: int, rng: np.random.Generator, regime: str = "identity") -> float:
    """p-value of H0 "non-decreasing" against a unimodal rise-then-fall (module docstring):
    ``identity``, residual permutations around the non-decreasing fit; ``aggregate``, binomial
    draws from it (the null's own sampling noise)."""
    k = np.asarray(k, float)
    n = np.asarray(n, float)
    w = np.where(n > 0, n, 0.0)
    y = k / np.where(n > 0, n, 1)
    ss, ss_up = unimodal_ss(y, w)
    t = float(ss_up[0] - ss[0])
    if t <= 1e-12:
        return 1.0
    null = isotonic_fit(y, w)[0]
    if regime == "aggregate":
        n_int = np.maximum(np.round(n).astype(int), 1)
        y_star = rng.binomial(np.broadcast_to(n_int, (n_perm, len(y))), np.clip(null, 0.0, 1.0)) / n_int
    else:
        resid = y - null
        idx = rng.permuted(np.tile(np.arange(len(y)), (n_perm, 1)), axis=1)
        y_star = np.clip(null[None, :] + resid[idx], 0.0, 1.0)
    ss_b, ss_up_b = unimodal_ss(y_star, w)
    t_star = ss_up_b - ss_b
    return exceedance_p(t_star, t, n_perm)


@dataclass
class Decline(Results):
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

    summary = describe


@dataclass
class CurvePhases(Results):
    """Where a curve's rise ends (``rise_end``: the rise is revisions ``[0, rise_end)``),
    its unimodal fit, and the decline when one is reported."""

    fit: np.ndarray
    rise_end: int
    decline: Optional[Decline] = None


def curve_phases(curve, min_rise_heads: float, min_decline_share: float, alpha: float, n_perm: int,
                 rng: np.random.Generator, regime: Optional[str] = None) -> CurvePhases:
    """The :class:`CurvePhases` of ``curve`` (rules of the module docstring); ``regime`` (default:
    :attr:`~stats.tracked.Curve.regime`) chooses the decline test's null draws."""
    regime = regime or curve.regime
    k, n = np.asarray(curve.k, float), np.asarray(curve.n, float)
    y = k / np.where(n > 0, n, 1)
    n_ref = float(np.median(n))
    fit = unimodal_fit(y, np.where(n > 0, n, 0.0))[0][0]
    peak, later = float(fit.max()), float(fit[-1])
    last_peak = int(np.flatnonzero(fit >= peak - 1e-12)[-1])
    drop = peak - later
    if last_peak == len(y) - 1 or drop * n_ref < min_rise_heads - 1e-9 or drop < min_decline_share * peak - 1e-12:
        return CurvePhases(fit, len(y))  # rises to the last revision, or falls by too little to be a decline
    p_value = decline_test(k, n, min(n_perm, DECLINE_PERMUTATIONS), rng, regime)
    if p_value > alpha:
        return CurvePhases(fit, len(y))
    revs, tok = curve.revisions, curve.tokens
    return CurvePhases(fit, last_peak + 1, Decline(
        peak, peak * n_ref, str(revs[last_peak]), float(tok[last_peak]), later, later * n_ref, drop * n_ref,
        drop / peak, [str(revs[last_peak]), str(revs[last_peak + 1])], p_value))
