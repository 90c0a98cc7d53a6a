"""Shape verdict of a curve: ``sharp``, ``gradual`` or ``none``, with its evidence.

Evidence (all reported):

- ``delta_aicc``: AICc (QAICc under overdispersion) of each model minus the best;
- ``max_jump``: the largest change of the observed fraction between adjacent
  revisions in the direction of the overall change (the sign of the logistic's
  ceiling - floor), its bracketing revisions and tokens, and ``max_jump_share``,
  that jump over the total rise (max - min of the observed fractions);
- ``width_decades`` (fitted 10-90 width) against ``spacing_decades`` (the log10 gap
  of the revisions bracketing t50);
- ``p_step``: the parametric-bootstrap p-value of H0 step against the logistic
  (:func:`stats.hypotheses.step_vs_logistic`).

Verdict rule (thresholds are config values, defaults in brackets):

1. ``none`` when the curve cannot show a transition: fewer than ``min_points`` [5]
   revisions with positive tokens; or a total rise (max - min of the observed fractions) below ``min_rise`` [0.02]; or no
   evidence of change, the constant model within ``delta_aicc_none`` [2] of the best
   AICc. The reason is stated.
2. ``sharp`` when at least ``min_jump_share`` [0.5] of the rise happens between one
   pair of adjacent revisions AND either the fitted 10-90 width is at most
   ``width_factor`` [1] x the checkpoint spacing there (the rise fits in the gap),
   or a single step is not rejected (``p_step >= alpha`` [0.05]).
3. ``gradual`` otherwise: the change is real but spread over several revisions.

A threshold metric can make a smooth change look sharp (Schaeffer et al. 2023):
the analysis also reports the largest-jump share of the class's continuous metric
(:func:`jump_share` on log10 mean selectivity, or the mean first-token attention).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

SHAPES = ("sharp", "gradual", "none")


@dataclass
class ShapeVerdict:
    shape: str
    reason: str
    evidence: dict = field(default_factory=dict)

    def to_dict(self):
        return {"shape": self.shape, "reason": self.reason, **self.evidence}


def jump_share(values, direction: Optional[float] = None) -> dict:
    """Largest adjacent change of ``values`` in ``direction`` and its share of the range.

    ``direction`` > 0 looks for the largest rise, < 0 the largest fall; by default
    the sign of last - first.
    """
    v = np.asarray(values, float)
    if v.size < 2 or not np.all(np.isfinite(v)):
        return {"max_jump": float("nan"), "max_jump_share": float("nan"), "index": None}
    if direction is None or direction == 0 or not np.isfinite(direction):
        direction = np.sign(v[-1] - v[0]) or 1.0
    d = np.diff(v) * np.sign(direction)
    i = int(np.argmax(d))
    rng = float(v.max() - v.min())
    share = float(d[i] / rng) if rng > 0 else 0.0
    return {"max_jump": float(d[i] * np.sign(direction)), "max_jump_share": share, "index": i}


def classify_shape(
    tokens,
    k,
    n,
    revisions,
    fits: Optional[dict],
    times=None,
    p_step: Optional[float] = None,
    min_points: int = 5,
    min_rise: float = 0.02,
    delta_aicc_none: float = 2.0,
    min_jump_share: float = 0.5,
    width_factor: float = 1.0,
    alpha: float = 0.05,
) -> ShapeVerdict:
    """Apply the verdict rule of the module docstring to one curve."""
    tokens = np.asarray(tokens, float)
    k = np.asarray(k, float)
    n = np.asarray(n, float)
    revisions = list(revisions)
    m = len(tokens)
    f = k / np.where(n > 0, n, 1)
    ev = {"n_points": m, "rise": float(f.max() - f.min()) if m else 0.0}
    if m < min_points:
        return ShapeVerdict("none", f"too short: {m} revisions with positive tokens < min_points {min_points}", ev)
    direction = None
    if fits is not None:
        pr = fits["logistic"].params
        direction = float(pr["ceiling"] - pr["floor"])
        aicc = {name: fit.aicc for name, fit in fits.items()}
        best = min(aicc.values())
        ev["best_model"] = min(aicc, key=aicc.get)
        ev["aicc"] = aicc
        ev["delta_aicc"] = {name: (a - best if np.isfinite(a) else float("inf")) for name, a in aicc.items()}
    j = jump_share(f, direction)
    i = j.pop("index")
    ev.update(j)
    if i is not None:
        ev["max_jump_revisions"] = [revisions[i], revisions[i + 1]]
        ev["max_jump_tokens"] = [float(tokens[i]), float(tokens[i + 1])]
    if times is not None:
        ev["width_decades"] = times.width_decades
        ev["width_is_bound"] = times.width_is_bound
        ev["spacing_decades"] = times.spacing_decades
    ev["p_step"] = p_step
    if ev["rise"] < min_rise:
        return ShapeVerdict("none", f"flat: total rise {ev['rise']:.3f} < min_rise {min_rise}", ev)
    if fits is None:
        return ShapeVerdict("none", "no fits", ev)
    dc = ev["delta_aicc"]["constant"]
    if dc <= delta_aicc_none:
        return ShapeVerdict("none", f"no evidence of change: constant model within {dc:.2f} <= {delta_aicc_none} AICc of the best", ev)
    share = ev["max_jump_share"]
    narrow = times is not None and times.width_decades <= width_factor * times.spacing_decades
    step_ok = p_step is not None and p_step >= alpha
    if share >= min_jump_share and (narrow or step_ok):
        why = []
        if narrow:
            why.append(f"10-90 width {times.width_decades:.3f} <= {width_factor} x spacing {times.spacing_decades:.3f} decades")
        if step_ok:
            why.append(f"single step not rejected (p = {p_step:.3f})")
        return ShapeVerdict("sharp", f"{share:.0%} of the rise between adjacent revisions; " + "; ".join(why), ev)
    why = []
    if share < min_jump_share:
        why.append(f"largest adjacent jump is {share:.0%} < {min_jump_share:.0%} of the rise")
    else:
        why.append(
            f"width {times.width_decades:.3f} > {width_factor} x spacing {times.spacing_decades:.3f} decades and step rejected (p = {p_step:.3g})"
            if times is not None and p_step is not None
            else "no evidence the rise fits between two revisions"
        )
    return ShapeVerdict("gradual", "; ".join(why), ev)
