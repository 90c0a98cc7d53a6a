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

Censoring (:mod:`stats.censoring`): a curve whose rise midpoint lies outside the
screened range is not given a midpoint inside it. Its times are the bound
(:func:`censored_times`): ``t50 <= t_1`` (``censored = "left"``, ``t50_bound =
"upper"``) or ``t50 > t_m`` (``"right"``, ``"lower"``), the interval the open
half-line ``[None, t_1]`` or ``[t_m, None]``, and its bootstrap draws the bound
itself. A curve whose midpoint is inside but whose bootstrap percentiles reach
beyond the range gets an open interval end (None: "before the first revision" or
"after the last"), never an end clamped to the range.

Short rises (a rise of fewer than four revisions before a decline) are located by
resolution alone (:func:`bracket_times`): the midpoint lies between the two
revisions where the count first passes half of its rise.

Intervals are bootstrap percentile intervals (never resampling revisions).

Gap ratio: ``ratio = t50(late class) / t(early class)`` (by default t50(BOS) over the
induction formation point, itself the induction curve's t50, or its onset with
``formation = onset``). Its interval is the percentile interval of the ratio over
paired replicates of the two independent curve bootstraps, and its separation test
is :func:`stats.hypotheses.separation_test`, ``p = P*(log ratio <= 0)``.

A censored side makes the ratio a one-sided bound (``bound``): the early class formed at or before
``t_1`` (left) or the late one after ``t_m`` (right) gives ``ratio >= t_late / t_early`` with the bound
values (``bound = "lower"``; e.g. t50(BOS) / t_1); the opposite censorings an upper bound. The interval
is then one-sided at ``level``, from the free side's bootstrap against the bound. The test stays valid:
with the early class at or before ``t_1``, H0 ``t_late <= t_early`` implies ``t_late <= t_1``, so
``p = P*(t_late <= t_1)`` tests a null that contains H0. An upper bound cannot show a ratio above 1 (the
true ratio may lie anywhere below it): no test, ``p = 1`` (drawn as a point, the bound would read as the
ratio and reject where nothing was shown). Censorings on both sides in the same direction (both left, or
both right) leave the ratio unbounded: no ratio.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Optional

import numpy as np

from stats.bootstrap import parametric_bootstrap
from stats.config import DEFAULTS, FORMATIONS
from stats.hypotheses import separation_test
from stats.models.logistic import LN9
from stats.results import Results
from stats.units import BOUND_SIGN


def logistic_times(theta, x, rng: Optional[np.random.Generator] = None, width_factor: float = 1.0):
    """Onset, t50, saturation (log10 tokens) of internal logistic parameters (B, 4), by the resolution
    and censoring rules of the module docstring (an unresolved t50 drawn uniformly in its gap from
    ``rng``, else the gap's midpoint): a dict of (B,) arrays."""
    theta = np.atleast_2d(theta)
    x = np.asarray(x, float)
    mu = theta[:, 2].copy()
    width = 2 * LN9 / np.exp(theta[:, 3])
    j = np.clip(np.searchsorted(x, mu, side="right") - 1, 0, len(x) - 2)  # the gap holding mu (clipped to the range)
    lo_gap, hi_gap = x[j], x[j + 1]
    unresolved = (mu >= x[0]) & (mu <= x[-1]) & (width <= width_factor * (hi_gap - lo_gap))
    onset, t50, sat = mu - width / 2, mu, mu + width / 2
    if unresolved.any():
        draw = (lo_gap + hi_gap) / 2 if rng is None else rng.uniform(lo_gap, hi_gap)
        t50 = np.where(unresolved, draw, t50)
        onset, sat = np.where(unresolved, t50, onset), np.where(unresolved, t50, sat)
    bound = np.where(mu < x[0], "upper", np.where(mu > x[-1], "lower", ""))
    return {"onset": onset, "t50": np.clip(t50, x[0], x[-1]), "t50_raw": t50, "saturation": sat, "width": width,
            "spacing": hi_gap - lo_gap, "unresolved": unresolved, "gap_lo": lo_gap, "gap_hi": hi_gap, "bound": bound}


@dataclass
class TransitionTimes(Results):
    """Onset, t50 and saturation (tokens) with intervals; see module docstring."""

    EXCLUDE = ("draws_t50", "draws_onset")

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
    #: ``left`` / ``right`` when the rise's midpoint lies outside the screened range
    censored: Optional[str] = None
    #: the 10-90 width's bootstrap interval (decades); a replicate whose rise fits between two
    #: adjacent revisions counts as 0 at the lower end and as that spacing at the upper end
    width_ci: list = field(default_factory=lambda: [float("nan"), float("nan")])

    def summary(self) -> str:
        sign = {"upper": "<= ", "lower": "> "}.get(self.t50_bound, "")
        return (f"t50 {sign}{self.t50:.3g} tokens {self.t50_ci}, onset {self.onset:.3g}, saturation "
                f"{self.saturation:.3g}; 10-90 width {'<= ' if self.width_is_bound else ''}{self.width_decades:.3g} decades")


def percentile_interval(draws, level: float) -> list:
    """The central ``level`` percentile interval of ``draws``."""
    a = (1 - level) / 2
    return [float(v) for v in np.quantile(draws, [a, 1 - a])]


def transition_times(fit, boot=None, rng: Optional[np.random.Generator] = None, level: float = DEFAULTS.level,
                     width_factor: float = DEFAULTS.shape.width_factor) -> TransitionTimes:
    """Times of a logistic :class:`FitResults`, with intervals from its bootstrap ``boot``."""
    x, nan = fit.x, float("nan")
    pt = {key: v[0] for key, v in logistic_times(fit.theta[None, :], x, None, width_factor).items()}
    unresolved, bound = bool(pt["unresolved"]), str(pt["bound"]) or None
    width = float(pt["spacing"] if unresolved else pt["width"])
    notes, bracket = [], None
    if unresolved:
        bracket = [float(10 ** pt["gap_lo"]), float(10 ** pt["gap_hi"])]
        notes.append("transition narrower than the checkpoint spacing: width is an upper bound, times are bracketed")
    if bound == "upper":
        notes.append("t50 before the first revision: reported t50 is an upper bound")
    elif bound == "lower":
        notes.append("t50 after the last revision: reported t50 is a lower bound")
    cis = dict.fromkeys(("onset", "t50", "saturation"), [nan, nan])
    draws_t50 = draws_onset = None
    width_ci = [0.0, width] if unresolved else [nan, nan]
    if boot is not None:
        bt = logistic_times(boot.theta, x, rng, width_factor)
        for key in cis:
            lo, hi = percentile_interval(bt["t50_raw" if key == "t50" else key], level)
            if unresolved:
                lo, hi = min(lo, pt["gap_lo"]), max(hi, pt["gap_hi"])
            cis[key] = [None if lo < x[0] - 1e-9 else float(10**lo), None if hi > x[-1] + 1e-9 else float(10**hi)]
        draws_t50, draws_onset = bt["t50"], bt["onset"]
        inside = bt["bound"] == ""
        if inside.any() and not unresolved:
            a = (1 - level) / 2
            width_ci = [float(np.quantile(np.where(bt["unresolved"], 0.0, bt["width"])[inside], a)),
                        float(np.quantile(np.where(bt["unresolved"], bt["spacing"], bt["width"])[inside], 1 - a))]
        if cis["t50"][0] is None:
            notes.append("the t50 interval reaches before the first revision (open lower end)")
        if cis["t50"][1] is None:
            notes.append("the t50 interval reaches after the last revision (open upper end)")
    return TransitionTimes(
        onset=float(10 ** pt["onset"]), t50=float(10 ** pt["t50"]), saturation=float(10 ** pt["saturation"]),
        onset_ci=cis["onset"], t50_ci=cis["t50"], saturation_ci=cis["saturation"],
        width_decades=width, width_is_bound=unresolved, spacing_decades=float(pt["spacing"]),
        bracket_tokens=bracket, t50_bound=bound, level=level, notes=notes,
        draws_t50=draws_t50, draws_onset=draws_onset, width_ci=width_ci)


def censored_times(side: str, bound_tokens: float, n_boot: int, level: float = 0.95,
                   note: Optional[str] = None) -> TransitionTimes:
    """Times of a curve whose rise midpoint lies outside the screened range (module docstring): all
    ``<= bound_tokens`` (``side`` ``left``) or ``> bound_tokens`` (``right``), the intervals open
    half-lines, the bootstrap draws the bound (so that a gap over it is a one-sided bound)."""
    t = float(bound_tokens)
    draws = np.full(n_boot, float(np.log10(t)))
    ci = [None, t] if side == "left" else [t, None]
    bound = "upper" if side == "left" else "lower"
    text = note or (f"t50 at or before the first revision ({t:.3g} tokens): an upper bound" if side == "left"
                    else f"t50 after the last revision ({t:.3g} tokens): a lower bound")
    return TransitionTimes(
        onset=t, t50=t, saturation=t, onset_ci=list(ci), t50_ci=list(ci), saturation_ci=list(ci),
        width_decades=float("nan"), width_is_bound=False, spacing_decades=float("nan"),
        bracket_tokens=None, t50_bound=bound, level=level, notes=[text],
        draws_t50=draws, draws_onset=draws.copy(), censored=side)


def bracket_times(lo_tokens: float, hi_tokens: float, n_boot: int, rng: np.random.Generator,
                  level: float = 0.95) -> TransitionTimes:
    """Times of a rise located by resolution alone: between revisions ``lo`` and ``hi``
    (point: the log-midpoint; interval: the whole gap; draws uniform in log10 tokens)."""
    a, b = float(np.log10(lo_tokens)), float(np.log10(hi_tokens))
    mid = float(10 ** ((a + b) / 2))
    draws = rng.uniform(a, b, n_boot)
    ci = [float(lo_tokens), float(hi_tokens)]
    return TransitionTimes(
        onset=mid, t50=mid, saturation=mid, onset_ci=list(ci), t50_ci=list(ci), saturation_ci=list(ci),
        width_decades=b - a, width_is_bound=True, spacing_decades=b - a,
        bracket_tokens=list(ci), t50_bound=None, level=level,
        notes=["rise located by the checkpoints alone (a short rise before a decline): times are bracketed"],
        draws_t50=draws, draws_onset=draws.copy(), width_ci=[0.0, b - a])


def bootstrap_transition_times(fit, dispersion, n_boot: int, rng: np.random.Generator, level: float = DEFAULTS.level,
                               width_factor: float = DEFAULTS.shape.width_factor,
                               overdispersion: bool = DEFAULTS.fit.overdispersion):
    """Times of a logistic fit with the analysis's bootstrap: one phi a replicate drawn
    from ``dispersion`` (:meth:`Dispersion.draw`) when ``overdispersion``; returns
    ``(times, boot)``."""
    phi = dispersion.draw(n_boot, rng) if overdispersion else 1.0
    boot = parametric_bootstrap(fit, n_boot, rng, dispersion=phi)
    return transition_times(fit, boot, rng, level, width_factor), boot


@dataclass
class GapRatio(Results):
    """t(late) / t(early) for one model, with its interval and separation test."""

    EXCLUDE = ("level",)

    model: str
    late_class: str
    early_class: str
    formation: str
    t_late: float
    t_early: float
    ratio: float
    ratio_ci: list
    p_value: float
    #: ``lower`` / ``upper`` when a censored time makes the ratio a one-sided bound
    bound: Optional[str] = None
    null: str = field(init=False, default="t_late / t_early <= 1")
    notes: list = field(default_factory=list)
    level: float = 0.95

    def summary(self) -> str:
        sign = BOUND_SIGN.get(self.bound, "")
        return (f"{self.model}: {self.late_class} / {self.early_class} ({self.formation}) gap {sign}{self.ratio:.3g}x, "
                f"{self.level:.0%} interval {self.ratio_ci}, p = {self.p_value:.3g} (H0: {self.null})")


def _gap_bound(late: TransitionTimes, early: TransitionTimes) -> tuple:
    """(bound, note) of a ratio from its sides' censoring (module docstring)."""
    low = late.censored == "right" or early.censored == "left" or late.t50_bound == "lower" or early.t50_bound == "upper"
    high = late.censored == "left" or early.censored == "right" or late.t50_bound == "upper" or early.t50_bound == "lower"
    if low and high:
        return "none", "both times censored in directions that leave the ratio unbounded: no ratio"
    if low:
        return "lower", "a side is censored: the ratio is a lower bound, its interval and test one-sided"
    if high:
        return "upper", "a side is censored: the ratio is an upper bound, its interval and test one-sided"
    return None, None


def gap_ratio(model: str, late: TransitionTimes, early: TransitionTimes, formation: str = DEFAULTS.times.formation,
              late_class: str = DEFAULTS.times.late_class, early_class: str = DEFAULTS.times.early_class,
              level: float = DEFAULTS.level) -> GapRatio:
    """Gap ratio of two curves' times from their bootstrap draws (see module docstring)."""
    if formation not in FORMATIONS:
        raise ValueError(f"formation {formation!r}: valid choices are {', '.join(map(repr, FORMATIONS))}")
    t_early = early.t50 if formation == "t50" else early.onset
    d_early = early.draws_t50 if formation == "t50" else early.draws_onset
    bound, note = _gap_bound(late, early)
    notes, nan = [note] if note else [], float("nan")
    gap = partial(GapRatio, model, late_class, early_class, formation, late.t50, t_early, level=level)
    if bound == "none":
        return gap(nan, [None, None], nan, notes=notes)
    ratio = late.t50 / t_early
    if late.draws_t50 is None or d_early is None:
        return gap(ratio, [nan, nan], nan, bound, notes=notes + ["no bootstrap draws"])
    B = min(len(late.draws_t50), len(d_early))
    log_ratio = late.draws_t50[:B] - d_early[:B]
    if bound == "lower":
        ci = [float(10 ** np.quantile(log_ratio, 1 - level)), None]
    elif bound == "upper":  # the ratio may be anything below its bound: no evidence that it exceeds 1
        return gap(ratio, [None, float(10 ** np.quantile(log_ratio, level))], 1.0, bound,
                   notes=notes + ["an upper bound cannot show a ratio above 1: p = 1"])
    else:
        lo, hi = percentile_interval(log_ratio, level)
        ci = [float(10**lo), float(10**hi)]
    return gap(ratio, ci, separation_test(log_ratio).p_value, bound, notes=notes)
