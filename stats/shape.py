"""Shape verdict of a curve: ``sharp``, ``gradual``, ``unresolved`` or ``none``, with its evidence.

The verdict belongs to the model, not to the checkpoint grid: whether a transition
happened is judged from the size of the change against a stated noise model
(:mod:`stats.change`), and how sharp it is from its 10-90 width in decades of tokens
(:mod:`stats.width`), a quantity of training, which more checkpoints only pin down
further.

Two regimes, by what the counts are (``analysis.shape.regime``; ``auto`` chooses
by the data, :func:`stats.curve_analysis.curve_regime`):

- ``identity``: the counts follow the *same* heads across revisions (a per-head
  table: the runs' ``heads.csv``, or a ``heads_csv`` file). A head that forms switches
  on at its own time ``tau_h`` and stays on, up to *flicker* near its threshold::

      k_j = #{h : tau_h <= t_j} + flicker_j.

  The change test permutes each head's flags on its own; the width is bounded by the
  heads' switch-on times (:func:`stats.switching.switched_counts`) as well as fitted.
- ``aggregate``: counts without head identity (``source=csv``), treated as independent
  (beta-)binomial draws around a curve ``p(t)``: the change test is a quasi-likelihood
  ratio with a parametric bootstrap, the width the fitted logistic's, with its
  bootstrap interval.

Both regimes share the rule below and the censoring and decline handling done before
it (:mod:`stats.censoring`, :mod:`stats.phases`: the verdict is of the rise, inside the
range); their operating characteristics are measured in ``benchmarks/bench_shape_oc.py``
and ``benchmarks/bench_stats_calibration.py``.

Evidence (all reported, :data:`stats.curve_analysis.RECORD`): the change test, the width
(fitted, its interval, the grid's bounds, the limits read, ``resolution``), the rise in
heads, the largest adjacent jump and its share of the rise (evidence, no longer the
criterion: it measures the grid, and 40 revisions every 1000 steps split a rise of 0.07
decades into intervals none of which holds half of it), ``delta_aicc`` of the four models
and ``p_step``, the bootstrap test of a *pure* step (:func:`stats.hypotheses.step_vs_logistic`).

Verdict rule (thresholds are :class:`stats.config.ShapeConfig` values, defaults in
brackets):

1. ``none`` when the curve cannot show a transition, with the reason stated: fewer than
   ``min_points`` [5] revisions with positive tokens; a rise ``R < min_rise_heads`` [2]
   heads (one head switching is no circuit); no evidence of change against noise
   (``p_change > alpha`` [0.05]); a change that rests on one revision (an outlier inside
   the range, or the last revision alone, which a later checkpoint would tell from the
   start of a rise); or a rise whose midpoint lies outside the range (censored: a bound).
2. ``sharp`` when the 10-90 width's upper limit is at most ``sharp_width_decades`` [0.5]
   ("sharp at this resolution" when the limit is one checkpoint interval's spacing);
3. ``gradual`` when its lower limit exceeds it;
4. ``unresolved`` otherwise: the reason says what would resolve it (refining between two
   named revisions, or more heads).

A threshold metric can make a smooth change look sharp (Schaeffer et al. 2023): the
analysis also reads the class's continuous metrics (log10 mean selectivity, mean
first-token attention, induction loss) by the same width rule and states a resolved
disagreement (:func:`qualify_verdict`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np
from scipy import stats as sps

from stats.config import DEFAULTS, REGIMES, ShapeConfig
from stats.errors import StatsError
from stats.hypotheses import TestResult
from stats.results import Results, record
from stats.change import test_label
from stats.times import percentile_interval
from stats.width import boundary_p, grid_bounds, width_verdict

SHAPES = ("sharp", "gradual", "unresolved", "none")


@dataclass
class ShapeVerdict(Results):
    """A verdict, its reason and its evidence (the entries of the module docstring)."""

    shape: str
    reason: str
    evidence: dict = field(default_factory=dict)

    def to_dict(self):
        """The record with the evidence's entries in place of ``evidence``."""
        out = record(self)
        evidence = out.pop("evidence")
        return out | evidence

    def summary(self) -> str:
        return f"{self.shape}: {self.reason}"


def jump_share(values, direction: Optional[float] = None) -> dict:
    """Largest adjacent change of ``values`` in ``direction`` (> 0 a rise, < 0 a fall; by default the
    sign of last - first) and its share of the range."""
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


def share_interval(jump_heads: float, rise_heads: float, level: float = 0.95) -> list:
    """Clopper-Pearson interval of the share ``J / R`` (``J`` of ``R`` heads, rounded):
    ``[B(a/2; J, R-J+1), B(1-a/2; J+1, R-J)]``, ``B`` the beta quantile, 0 and 1 at the ends."""
    r = int(round(rise_heads))
    j = int(np.clip(round(jump_heads), 0, max(r, 0)))
    if r < 1:
        return [float("nan"), float("nan")]
    a = 1 - level
    lo = 0.0 if j == 0 else float(sps.beta.ppf(a / 2, j, r - j + 1))
    hi = 1.0 if j == r else float(sps.beta.ppf(1 - a / 2, j + 1, r - j))
    return [lo, hi]


def jump_evidence(f, n_ref: float, direction, regime: str, fit=None, boot=None, level: float = 0.95) -> dict:
    """The largest adjacent change in the direction of the rise, its share and interval: ``identity``,
    of the observed fractions (``J`` of ``R`` heads, Clopper-Pearson); ``aggregate``, of the fitted
    logistic at the revisions (noisy draws inflate every observed jump and the range), the interval
    the bootstrap percentile interval of the replicate fits' shares."""
    if regime == "aggregate" and fit is not None:
        j = jump_share(fit.fitted, direction)
        rise = float(np.ptp(fit.fitted))
        ci = [float("nan")] * 2
        if boot is not None and j["index"] is not None:
            curves = fit.model.mean(boot.theta, fit.x)
            d = np.diff(curves, axis=1) * (np.sign(direction) if direction else 1.0)
            rng_b = np.ptp(curves, axis=1)
            ci = percentile_interval(np.where(rng_b > 0, d.max(1) / np.where(rng_b > 0, rng_b, 1), 0.0), level)
    else:
        j = jump_share(f, direction)
        rise = float(f.max() - f.min()) if f.size else 0.0
        ci = None
    i = j.pop("index")
    ev = {"rise": rise, "rise_heads": rise * n_ref, **j}
    ev["jump_heads"] = j["max_jump"] * n_ref if np.isfinite(j["max_jump"]) else float("nan")
    if ci is None:
        ci = share_interval(abs(ev["jump_heads"]), ev["rise_heads"], level) if i is not None else [float("nan")] * 2
    ev["max_jump_share_ci"] = ci
    ev["_index"] = i
    return ev


def _none_reason(ev: dict, cfg: ShapeConfig, fits, change, alpha: float) -> Optional[str]:
    """Why the curve shows no transition (rule 1 of the module docstring), or None."""
    if ev["rise_heads"] < cfg.min_rise_heads - 1e-9:
        return f"flat: total rise {ev['rise_heads']:.3g} heads < min_rise_heads {cfg.min_rise_heads}"
    if fits is None:
        return "no fits"
    if change is None:
        return "no test of change"
    if change.p_value > alpha:
        return f"no evidence of change against noise: {test_label(change)} p = {change.p_value:.3g} > {alpha}"
    return None


def sharp_or_gradual(ev: dict, cfg: ShapeConfig, tokens, k, n, revisions, regime: str, times=None,
                     switched=None, alpha: float = DEFAULTS.alpha, phi: float = 1.0,
                     unseen: Optional[str] = None, rng: Optional[np.random.Generator] = None) -> ShapeVerdict:
    """Rules 2-4 of the module docstring: the width rule of :mod:`stats.width` on the fitted width's
    interval (``times``) and, for ``identity`` counts, the settled heads' rise (``switched``). An
    aggregate claim must besides exclude its boundary (:func:`stats.width.boundary_p` at ``alpha``,
    dispersion ``phi``, simulated from ``rng``): the parametric bootstrap refits draws from the fitted
    curve, so a step fitted to noise bootstraps as a step."""
    x = np.log10(np.asarray(tokens, float))
    jump = ev.get("max_jump")
    direction = float(np.sign(jump) or 1.0) if jump is not None and np.isfinite(jump) else 1.0
    width, ci, grid = float("nan"), None, None
    if times is not None:
        width, ci = times.width_decades, times.width_ci
        if regime == "identity" and times.width_is_bound:
            ci = None  # "inside one interval" is the fit's reading; the heads' switch-on times show where they are
    if regime == "identity":
        grid = grid_bounds(tokens, k if switched is None else switched, direction, heads=True)
        unseen = unseen if direction > 0 else None
        if unseen is not None:  # the heads' rise may go on beyond the range: its width has no upper bound
            ev["rise_end_unseen"] = unseen
            ci = None if ci is None else [ci[0], float("inf")]
        if grid is not None and (unseen is not None or (times is not None and _beyond_range(times, x))):
            grid = grid | {"upper": float("inf"), "beyond": True}
    elif times is not None and times.width_is_bound and times.bracket_tokens is not None:
        j = int(np.clip(np.searchsorted(x, np.log10(times.bracket_tokens[0]) - 1e-9), 0, len(x) - 2))
        grid = {"lower": 0.0, "upper": float(x[j + 1] - x[j]), "low_between": [j, j + 1], "high_between": [j, j + 1]}
    shape, reason, wev = width_verdict(width, ci, grid, cfg.sharp_width_decades, [str(r) for r in revisions])
    ev.update(wev)
    if regime != "identity" and shape in ("sharp", "gradual"):  # fresh draws: the claim must exclude its boundary
        p_b = boundary_p(tokens, k, n, phi, cfg.sharp_width_decades, shape, rng, n_sim=cfg.boundary_draws)
        ev["p_boundary"] = p_b
        if p_b > alpha:
            shape, reason = "unresolved", (f"unresolved: read {shape} ({reason}), but a rise of 10-90 width "
                                           f"{cfg.sharp_width_decades:g} decades, the criterion, fits nearly as well "
                                           f"(boundary test p = {p_b:.3g} > {alpha}): the noise does not tell")
    if ev.get("rise_end_unseen") and shape != "none":
        unseen = ev["rise_end_unseen"]
        why = {"start": "heads off before training are on at the first revision",
               "end": "heads are still switching on at its end"}
        reason += (f"; the rise's {'start and end lie' if unseen == 'both' else unseen + ' lies'} outside the range ("
                   + ", and ".join(why[k] for k in why if unseen in (k, "both")) + "): the width has no upper bound")
    if ev.get("max_jump_revisions"):
        a, b = ev["max_jump_revisions"]
        reason += f"; the largest jump ({a} -> {b}) holds {100 * ev['max_jump_share']:.0f}% of the rise"
    return ShapeVerdict(shape, reason, ev)


def _beyond_range(times, x) -> bool:
    """The fitted rise's 10 % or 90 % point lies outside the screened range (log10 tokens ``x``): the
    heads seen switching are part of a rise that goes on before or after it, so their spread bounds
    the rise's width from below only."""
    return bool(np.log10(times.onset) < x[0] - 1e-9 or np.log10(times.saturation) > x[-1] + 1e-9)


def jump_location(tokens, revisions, i: Optional[int]) -> dict:
    """Where the largest jump (between revisions ``i`` and ``i + 1``) lies: its revisions, tokens and
    log10 spacing; {} without one."""
    if i is None:
        return {}
    return {"max_jump_revisions": [revisions[i], revisions[i + 1]],
            "max_jump_tokens": [float(tokens[i]), float(tokens[i + 1])],
            "jump_spacing_decades": float(np.log10(tokens[i + 1] / tokens[i]))}


def model_evidence(fits: Optional[dict]) -> tuple:
    """``(direction, evidence)`` of the four fits: the sign of the logistic's rise (ceiling - floor),
    and each model's AICc, the best and each one's difference to it; ``(None, {})`` without fits."""
    if fits is None:
        return None, {}
    pr = fits["logistic"].params
    aicc = {name: fit.aicc for name, fit in fits.items()}
    best = min(aicc.values())
    return float(pr["ceiling"] - pr["floor"]), {
        "best_model": min(aicc, key=aicc.get), "aicc": aicc,
        "delta_aicc": {name: (a - best if np.isfinite(a) else float("inf")) for name, a in aicc.items()}}


def classify_shape(tokens, k, n, revisions, fits: Optional[dict], times=None, p_step: Optional[float] = None,
                   change: Optional[TestResult] = None, config: Optional[ShapeConfig] = None,
                   alpha: float = DEFAULTS.alpha, level: float = DEFAULTS.level, regime: str = "identity",
                   boot=None, switched=None, unseen: Optional[str] = None,
                   rng: Optional[np.random.Generator] = None) -> ShapeVerdict:
    """Apply the verdict rule of the module docstring to one curve (its rise).

    ``fits``: the four model fits (None: none computed); ``times``: the logistic's
    :class:`~stats.times.TransitionTimes`; ``p_step``: the step test's p-value; ``switched``,
    ``unseen``: the heads switched on and which end of their rise the range misses
    (:func:`stats.curve_analysis._rise_end_unseen`); ``change``: the change test (None: no
    transition is called); ``boot``: the logistic's bootstrap; ``rng``: the boundary test's draws.
    """
    cfg = ShapeConfig() if config is None else config
    if regime not in REGIMES:
        raise StatsError(f"shape regime {regime!r}; valid: {list(REGIMES)}")
    tokens = np.asarray(tokens, float)
    k, n = np.asarray(k, float), np.asarray(n, float)
    revisions = list(revisions)
    m = len(tokens)
    f = k / np.where(n > 0, n, 1)
    n_ref = float(np.median(n)) if m else 0.0
    ev = {"n_points": m, "regime": regime, "rise": float(np.ptp(f)) if m else 0.0}
    ev["rise_heads"] = ev["rise"] * n_ref
    if m < cfg.min_points:
        return ShapeVerdict("none", f"too short: {m} revisions with positive tokens < min_points {cfg.min_points}", ev)
    direction, fitted = model_evidence(fits)
    ev.update(fitted)
    ev.update(jump_evidence(f, n_ref, direction, regime, None if fits is None else fits["logistic"], boot, level))
    ev.update(jump_location(tokens, revisions, ev.pop("_index")))
    if times is not None:
        ev.update({key: getattr(times, key) for key in ("width_decades", "width_is_bound", "spacing_decades")})
    ev["p_step"] = p_step
    ev["pure_step"] = None if p_step is None else bool(p_step >= alpha)
    ev["p_change"] = None if change is None else change.p_value
    reason = _none_reason(ev, cfg, fits, change, alpha)
    if reason is not None:
        return ShapeVerdict("none", reason, ev)
    phi = 1.0 if fits is None else float(fits["logistic"].dispersion)
    return sharp_or_gradual(ev, cfg, tokens, k, n, revisions, regime, times, switched, alpha, phi, unseen, rng)


def qualify_verdict(verdict: ShapeVerdict, continuous: dict) -> ShapeVerdict:
    """The verdict's cross-check against the class's continuous metrics (``continuous``: the shape
    each one's rise reads by :func:`stats.width.grid_bounds`): ``continuous_disagrees`` lists those
    that read the other *resolved* shape (a threshold can make a smooth change look sharp, Schaeffer
    et al. 2023), and the reason says so; an unresolved metric does not disagree."""
    if verdict.shape not in ("sharp", "gradual"):
        return verdict
    ev = verdict.evidence
    other = "gradual" if verdict.shape == "sharp" else "sharp"
    disagree = {m: v for m, v in continuous.items() if v.get("reads") == other}
    ev["continuous_disagrees"] = sorted(disagree)
    if not disagree:
        return verdict
    lo_hi = "; ".join(f"{m} reads {other} (10-90 width between {v['width_grid'][0]:.2g} and {v['width_grid'][1]:.2g} "
                      f"decades)" for m, v in sorted(disagree.items()))
    tail = ": sharp at the threshold only" if verdict.shape == "sharp" else ""
    return ShapeVerdict(verdict.shape, f"{verdict.reason}; the continuous metric {lo_hi}{tail}", ev)
