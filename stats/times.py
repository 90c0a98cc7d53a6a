"""Transition times from the logistic fit, with parametric-bootstrap intervals.

With ``x50 = log10 t50`` and slope ``s`` of the logistic (:mod:`stats.models.logistic`):

    onset      = x50 - ln 9 / s    (10 % of the rise)
    t50        = x50               (50 %)
    saturation = x50 + ln 9 / s    (90 %)
    width      = 2 ln 9 / s        (10-90 width, decades of tokens)

Resolution rule: the *spacing* at t50 is the log10 gap between the two revisions
that bracket x50. When ``width <= spacing`` the rise fits between two adjacent
revisions and the data cannot place it inside that gap (the likelihood is flat
there): the width is reported as an upper bound (the spacing), and onset, t50 and
saturation as the gap (point: its log-midpoint; interval: at least the whole gap).
In each bootstrap replicate an unresolved t50 is drawn uniformly (in log10 tokens)
within its gap, so the interval carries that ignorance.

Censoring rule: a midpoint before the first revision is clamped to the first
revision and flagged ``t50_bound = "upper"`` (the true t50 is at most that); after
the last revision, clamped to the last and flagged ``"lower"``.

Intervals are bootstrap percentile intervals (never resampling revisions).

Gap ratio: ``ratio = t50(late class) / t(early class)`` (by default t50(BOS) over the
induction formation point, itself the induction curve's t50, or its onset with
``formation = onset``). When the early class shows no transition (verdict ``none``)
but already has flagged heads at the first revision, its formation is
left-censored (``t <= first revision``, :func:`already_formed_times`) and the
ratio is a lower bound. Its interval is the percentile interval of the ratio over
paired replicates of the two independent curve bootstraps, and its separation test
is :func:`stats.hypotheses.separation_test`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from stats.models.logistic import LN9


def _spacing_and_gap(mu, x):
    """Gap index containing ``mu`` (clipped to the range) and its log10 spacing."""
    x = np.asarray(x, float)
    j = np.clip(np.searchsorted(x, mu, side="right") - 1, 0, len(x) - 2)
    return j, x[j + 1] - x[j]


def logistic_times(theta, x, rng: Optional[np.random.Generator] = None, width_factor: float = 1.0):
    """Onset, t50, saturation (log10 tokens) of internal logistic parameters (B, 4).

    Applies the resolution and censoring rules of the module docstring; with
    ``rng`` an unresolved t50 is drawn uniformly in its gap, without it the gap's
    midpoint is used. Returns a dict of (B,) arrays.
    """
    theta = np.atleast_2d(theta)
    x = np.asarray(x, float)
    mu = theta[:, 2].copy()
    width = 2 * LN9 / np.exp(theta[:, 3])
    j, spacing = _spacing_and_gap(mu, x)
    inside = (mu >= x[0]) & (mu <= x[-1])
    unresolved = inside & (width <= width_factor * spacing)
    onset, t50, sat = mu - width / 2, mu.copy(), mu + width / 2
    lo_gap, hi_gap = x[j], x[j + 1]
    if unresolved.any():
        if rng is None:
            draw = (lo_gap + hi_gap) / 2
        else:
            draw = rng.uniform(lo_gap, hi_gap)
        t50 = np.where(unresolved, draw, t50)
        onset = np.where(unresolved, t50, onset)
        sat = np.where(unresolved, t50, sat)
    bound = np.where(mu < x[0], "upper", np.where(mu > x[-1], "lower", ""))
    t50 = np.clip(t50, x[0], x[-1])
    return {
        "onset": onset,
        "t50": t50,
        "saturation": sat,
        "width": width,
        "spacing": spacing,
        "unresolved": unresolved,
        "gap": j,
        "gap_lo": lo_gap,
        "gap_hi": hi_gap,
        "bound": bound,
    }


@dataclass
class TransitionTimes:
    """Onset, t50 and saturation (tokens) with intervals; see module docstring."""

    onset: float
    t50: float
    saturation: float
    onset_ci: list
    t50_ci: list
    saturation_ci: list
    width_decades: float
    width_is_bound: bool
    spacing_decades: float
    bracket_tokens: Optional[list] = None
    t50_bound: Optional[str] = None
    level: float = 0.95
    notes: list = field(default_factory=list)
    #: bootstrap draws of log10 t50 and onset (for gap ratios), not serialised
    draws_t50: Optional[np.ndarray] = None
    draws_onset: Optional[np.ndarray] = None

    def to_dict(self):
        return {
            "onset": self.onset,
            "onset_ci": self.onset_ci,
            "t50": self.t50,
            "t50_ci": self.t50_ci,
            "saturation": self.saturation,
            "saturation_ci": self.saturation_ci,
            "width_decades": self.width_decades,
            "width_is_bound": self.width_is_bound,
            "spacing_decades": self.spacing_decades,
            "bracket_tokens": self.bracket_tokens,
            "t50_bound": self.t50_bound,
            "level": self.level,
            "notes": self.notes,
        }


def _pct(draws, level):
    a = (1 - level) / 2
    return [float(v) for v in np.quantile(draws, [a, 1 - a])]


def transition_times(fit, boot=None, rng: Optional[np.random.Generator] = None, level: float = 0.95,
                     width_factor: float = 1.0) -> TransitionTimes:
    """Times of a logistic :class:`FitResults`, with intervals from its bootstrap ``boot``."""
    x = fit.x
    pt = logistic_times(fit.theta[None, :], x, None, width_factor)
    unresolved = bool(pt["unresolved"][0])
    bound = str(pt["bound"][0]) or None
    notes = []
    bracket = None
    if unresolved:
        bracket = [float(10 ** pt["gap_lo"][0]), float(10 ** pt["gap_hi"][0])]
        width = float(pt["spacing"][0])
        notes.append("transition narrower than the checkpoint spacing: width is an upper bound, times are bracketed")
    else:
        width = float(pt["width"][0])
    if bound == "upper":
        notes.append("t50 before the first revision: reported t50 is an upper bound")
    elif bound == "lower":
        notes.append("t50 after the last revision: reported t50 is a lower bound")
    nan2 = [float("nan"), float("nan")]
    cis = {"onset": nan2, "t50": nan2, "saturation": nan2}
    draws_t50 = draws_onset = None
    if boot is not None:
        bt = logistic_times(boot.theta, x, rng, width_factor)
        for key in cis:
            lo, hi = _pct(bt[key], level)
            if unresolved:
                lo, hi = min(lo, pt["gap_lo"][0]), max(hi, pt["gap_hi"][0])
            cis[key] = [float(10**lo), float(10**hi)]
        draws_t50, draws_onset = bt["t50"], bt["onset"]
    return TransitionTimes(
        onset=float(10 ** pt["onset"][0]),
        t50=float(10 ** pt["t50"][0]),
        saturation=float(10 ** pt["saturation"][0]),
        onset_ci=cis["onset"],
        t50_ci=cis["t50"],
        saturation_ci=cis["saturation"],
        width_decades=width,
        width_is_bound=unresolved,
        spacing_decades=float(pt["spacing"][0]),
        bracket_tokens=bracket,
        t50_bound=bound,
        level=level,
        notes=notes,
        draws_t50=draws_t50,
        draws_onset=draws_onset,
    )


def already_formed_times(first_tokens: float, n_boot: int, level: float = 0.95) -> TransitionTimes:
    """Times of a class that shows no transition but has heads from the first revision.

    Its formation is left-censored: ``t <= first revision``. Onset and t50 are set to
    the first revision and flagged ``t50_bound = "upper"``; the bootstrap draws are
    that constant, so a gap ratio over it is a lower bound and its separation test
    conservative.
    """
    x0 = float(np.log10(first_tokens))
    draws = np.full(n_boot, x0)
    return TransitionTimes(first_tokens, first_tokens, first_tokens, [first_tokens] * 2, [first_tokens] * 2,
                           [first_tokens] * 2, float("nan"), False, float("nan"), None, "upper", level,
                           ["already formed at the first revision (no transition): time is an upper bound"], draws, draws)


def bootstrap_transition_times(fit, dispersion, n_boot: int, rng: np.random.Generator, level: float = 0.95,
                               width_factor: float = 1.0, overdispersion: bool = True):
    """Times of a logistic fit with the analysis's bootstrap: one phi a replicate drawn
    from ``dispersion`` (:meth:`Dispersion.draw`) when ``overdispersion``; returns
    ``(times, boot)``."""
    from stats.bootstrap import parametric_bootstrap

    phi = dispersion.draw(n_boot, rng) if overdispersion else 1.0
    boot = parametric_bootstrap(fit, n_boot, rng, dispersion=phi)
    return transition_times(fit, boot, rng, level, width_factor), boot


@dataclass
class GapRatio:
    """t(late) / t(early) for one model, with its interval and separation test."""

    model: str
    late_class: str
    early_class: str
    formation: str
    t_late: float
    t_early: float
    ratio: float
    ratio_ci: list
    p_value: float
    level: float = 0.95
    notes: list = field(default_factory=list)
    #: ``lower`` / ``upper`` when a censored time makes the ratio a bound
    bound: Optional[str] = None

    def to_dict(self):
        return {
            "model": self.model,
            "late_class": self.late_class,
            "early_class": self.early_class,
            "formation": self.formation,
            "t_late": self.t_late,
            "t_early": self.t_early,
            "ratio": self.ratio,
            "ratio_ci": self.ratio_ci,
            "p_value": self.p_value,
            "ratio_bound": self.bound,
            "null": "t_late / t_early <= 1",
            "notes": self.notes,
        }


def gap_ratio(model: str, late: TransitionTimes, early: TransitionTimes, formation: str = "t50",
              late_class: str = "bos", early_class: str = "induction", level: float = 0.95) -> GapRatio:
    """Gap ratio of two curves' times from their bootstrap draws (see module docstring)."""
    from stats.hypotheses import separation_test

    if formation not in ("t50", "onset"):
        raise ValueError(f"formation {formation!r}: valid choices are 't50', 'onset'")
    t_early = early.t50 if formation == "t50" else early.onset
    d_early = early.draws_t50 if formation == "t50" else early.draws_onset
    notes = []
    bound = None
    low = late.t50_bound == "lower" or early.t50_bound == "upper"
    high = late.t50_bound == "upper" or early.t50_bound == "lower"
    if low and not high:
        bound = "lower"
        notes.append("a time is censored at the observed range: the ratio is a lower bound")
    elif high and not low:
        bound = "upper"
        notes.append("a time is censored at the observed range: the ratio is an upper bound")
    elif low and high:
        notes.append("both times censored in opposite directions: the ratio is not bounded")
    ratio = late.t50 / t_early
    if late.draws_t50 is None or d_early is None:
        return GapRatio(model, late_class, early_class, formation, late.t50, t_early, ratio,
                        [float("nan"), float("nan")], float("nan"), level, notes + ["no bootstrap draws"], bound)
    B = min(len(late.draws_t50), len(d_early))
    log_ratio = late.draws_t50[:B] - d_early[:B]
    lo, hi = _pct(log_ratio, level)
    test = separation_test(log_ratio)
    return GapRatio(model, late_class, early_class, formation, late.t50, t_early, ratio,
                    [float(10**lo), float(10**hi)], test.p_value, level, notes, bound)
