"""Shape verdict of a curve: ``sharp``, ``gradual`` or ``none``, with its evidence.

Two regimes, by what the counts are (``analysis.shape.regime``; ``auto`` chooses
by the data, :func:`stats.curve_analysis.curve_regime`):

- ``identity``: the counts follow the *same* heads across revisions (a per-head
  table: the runs' ``heads.csv``, or a ``heads_csv`` file). The data model below
  holds, and the share of the rise in one interval is counted in heads from the
  observed counts, with its Clopper-Pearson interval.
- ``aggregate``: counts without head identity (``source=csv``), which the analysis
  treats as independent (beta-)binomial draws around a curve ``p(t)``. Every
  observed jump and both extremes carry sampling noise (the observed range of
  noisy fractions is inflated, the largest observed jump biased), so the share is
  that of the fitted logistic at the revisions, ``max_j (p_{j+1} - p_j) / range p``,
  with the percentile interval of the same share over the logistic's parametric
  bootstrap replicates; the rise in heads is the fitted range.

Both regimes share the ``none`` rule, the ``min_jump_share`` criterion and the
censoring and decline handling done before the verdict (:mod:`stats.censoring`,
:mod:`stats.phases`: the verdict is of the rise, inside the screened range). Their
operating characteristics are measured separately on simulated families of each
kind (``benchmarks/bench_shape_oc.py``, section D).

Data model (identity regime). A curve is ``k_j`` of ``n`` heads flagged at revisions
``t_1 < ... < t_m``. The *same* heads are followed across revisions, so the counts
are cumulative, not fresh draws: a head that forms switches on at its own time
``tau_h`` and stays on, up to *flicker* (a few heads near the threshold read on at
one revision and off at the next)::

    k_j = #{h : tau_h <= t_j} + flicker_j.

The adjacent increments ``d_j = k_{j+1} - k_j`` then count the heads that switched
on between ``t_j`` and ``t_{j+1}``: given the ``R`` heads that switch at all,
``(d_1, ..., d_{m-1}) ~ Multinomial(R, pi)`` with ``pi_j`` the mass of the
switch-on-time distribution in interval ``j``. The fits' binomial likelihood
(independent ``Binomial(n, p(t_j))`` draws at every revision) is a different model:
it re-draws every head at every revision, so with many heads any departure from an
exact two-level curve is significant. The verdict is therefore stated in heads.

Evidence (all reported):

- ``rise_heads`` ``R``: the total rise (max - min of the observed fractions) in heads
  (x the median ``n``); ``rise`` the same as a fraction;
- ``max_jump``: the largest change of the observed fraction between adjacent
  revisions in the direction of the overall change (the sign of the logistic's
  ceiling - floor), ``jump_heads`` ``J`` the same in heads, its bracketing revisions
  and tokens, its log10 spacing ``jump_spacing_decades``, and ``max_jump_share``
  ``s = J / R`` with ``max_jump_share_ci``, the Clopper-Pearson interval of ``J``
  successes in ``R`` trials (the multinomial model: ``J ~ Binomial(R, pi_j)``);
- ``p_change``: the permutation test of a monotone change (:func:`level_change_test`);
- ``delta_aicc``: AICc (QAICc under overdispersion) of each model minus the best
  (evidence only: as the old ``none`` criterion, the constant within 2 of the best,
  it sized badly, calling 8 % of flat beta-binomial curves (phi = 4) a change, and
  saw no 3-head circuit in 256 heads; ``benchmarks/bench_shape_oc.py``);
- ``width_decades`` (fitted 10-90 width) against ``spacing_decades`` (the log10 gap
  of the revisions bracketing t50);
- ``p_step``: the parametric-bootstrap p-value of H0 *pure* step against the
  logistic (:func:`stats.hypotheses.step_vs_logistic`) and ``pure_step``
  (``p_step >= alpha``).

Verdict rule (thresholds are :class:`stats.config.ShapeConfig` values, defaults in
brackets):

1. ``none`` when the curve cannot show a transition, with the reason stated:
   a. fewer than ``min_points`` [5] revisions with positive tokens;
   b. a rise ``R < min_rise_heads`` [2] heads (one head switching is no circuit);
   c. no evidence of change against noise: the monotone-change permutation test
      (:func:`level_change_test`) has ``p_change > alpha`` [0.05]. Exact in size
      under any exchangeable noise (fresh binomial or overdispersed draws, or the
      flicker of followed heads), so flat curves are called a transition at rate
      ``alpha``; a few heads that switch on and stay are seen, where a binomial
      AICc drowns them in the variance of fresh draws. A change seen at the last
      revision alone cannot be told from a one-revision outlier (p >= 2/m).
2. ``sharp`` when ``s = J / R >= min_jump_share`` [0.5]: at least half of the heads
   that switch on do so between the same two adjacent checkpoints, i.e. sharp *at
   the resolution of the checkpoints*, and the reason names that interval. When
   ``max_jump_share_ci`` contains ``min_jump_share`` the reason says the share is
   not resolved with ``R`` heads (the verdict is then the point estimate's).
3. ``gradual`` otherwise: the rise is spread over several intervals.

The step test is evidence, not a criterion: it asks whether *every* head switches
in one interval (under fresh binomial draws, so with hundreds of heads it rejects a
curve with a few heads outside the interval), which says "not a pure step", not
"gradual". The fitted 10-90 width is evidence too (and sets the resolution rule of
:mod:`stats.times`). Operating characteristic: ``benchmarks/bench_shape_oc.py``.

A threshold metric can make a smooth change look sharp (Schaeffer et al. 2023):
the analysis also reports the largest-jump share of the class's continuous metric
(:func:`jump_share` on log10 mean selectivity, or the mean first-token attention).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np
from scipy import stats as sps

from stats.config import DEFAULTS, REGIMES, ShapeConfig
from stats.errors import StatsError
from stats.hypotheses import TestResult, exceedance_p
from stats.isotonic import monotone_r2, unimodal_r2
from stats.results import Results, record
from stats.change import test_label
from stats.width import grid_bounds, switched_counts, width_verdict

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
        return {**out, **evidence}

    def summary(self) -> str:
        return f"{self.shape}: {self.reason}"


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


def share_interval(jump_heads: float, rise_heads: float, level: float = 0.95) -> list:
    """Clopper-Pearson interval of the share ``J / R`` (``J`` of ``R`` heads, rounded).

    ``[B(a/2; J, R-J+1), B(1-a/2; J+1, R-J)]`` with ``B`` the beta quantile, 0 and 1
    at the ends; ``[nan, nan]`` when ``R < 1``.
    """
    r = int(round(rise_heads))
    j = int(np.clip(round(jump_heads), 0, max(r, 0)))
    if r < 1:
        return [float("nan"), float("nan")]
    a = 1 - level
    lo = 0.0 if j == 0 else float(sps.beta.ppf(a / 2, j, r - j + 1))
    hi = 1.0 if j == r else float(sps.beta.ppf(1 - a / 2, j + 1, r - j))
    return [lo, hi]


def level_change_test(k, n, n_perm: int, rng: np.random.Generator, shape: str = "monotone") -> TestResult:
    """Permutation test of H0: no change across revisions, against a monotone change.

    Statistic: ``T`` = :func:`monotone_r2`, the share of the variance of the observed
    fractions that the best monotone (non-decreasing or non-increasing) fit
    explains: followed heads that switch on and stay make the counts monotone up to
    flicker. Under H0 the revisions are exchangeable (a flat population plus
    independent flicker, or independent draws around one level), so ``T`` is
    referred to its distribution over ``n_perm`` random permutations of the (k, n)
    pairs: ``p = (1 + #{T* >= T}) / (n_perm + 1)``, exact in size whatever the
    noise. A clean change after revision ``m - j`` can reach at best
    ``p = 2 / C(m, j)`` (the two orders of its two levels): 0.2 for ``j = 1``,
    0.044 for ``j = 2`` when ``m = 10``.

    ``shape = "unimodal"`` uses :func:`unimodal_r2` instead: the test of a curve that
    rises and falls again (a decline, :mod:`stats.phases`), whose best monotone fit
    explains little of a rise that returns to its floor.
    """
    k = np.asarray(k, float)
    n = np.asarray(n, float)
    m = k.size
    name = f"{shape}_change_permutation"
    if m < 2 or np.ptp(k / np.where(n > 0, n, 1)) == 0:
        return TestResult(name, "no change across revisions (exchangeable)", 0.0, 1.0, n_perm)
    stat = {"monotone": monotone_r2, "unimodal": unimodal_r2}[shape]
    t = float(stat(k, n)[0])
    idx = rng.permuted(np.tile(np.arange(m), (n_perm, 1)), axis=1)
    t_star = stat(k[idx], n[idx])
    p = exceedance_p(t_star, t, n_perm, tol=1e-9)
    return TestResult(name, "no change across revisions (exchangeable)", t, p, n_perm)


def _pct(v):
    return f"{100 * v:.0f}%"


def jump_evidence(f, n_ref: float, direction, regime: str, fit=None, boot=None, level: float = 0.95) -> dict:
    """The largest adjacent change in the direction of the rise, its share and interval.

    ``identity``: of the observed fractions (counts are cumulative, the share is
    ``J`` of ``R`` heads, Clopper-Pearson). ``aggregate``: of the fitted logistic at
    the revisions (independent draws make every observed jump and extreme noisy,
    and the range of noisy fractions is inflated), the interval the bootstrap
    percentile interval of the replicate fits' shares.
    """
    if regime == "aggregate" and fit is not None:
        j = jump_share(fit.fitted, direction)
        rise = float(np.ptp(fit.fitted))
        ci = [float("nan")] * 2
        if boot is not None and j["index"] is not None:
            curves = fit.model.mean(boot.theta, fit.x)
            d = np.diff(curves, axis=1) * (np.sign(direction) if direction else 1.0)
            rng_b = np.ptp(curves, axis=1)
            shares = np.where(rng_b > 0, d.max(1) / np.where(rng_b > 0, rng_b, 1), 0.0)
            a = (1 - level) / 2
            ci = [float(v) for v in np.quantile(shares, [a, 1 - a])]
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
                     flags=None) -> ShapeVerdict:
    """Rules 2-4 of the module docstring: the width rule of :mod:`stats.width` on the rise
    (``tokens``, ``k``, ``n``; ``flags``: its heads' flags, where known): the fitted width's
    interval from ``times``, narrowed where the counts follow the same heads (``identity``) by
    the grid's bounds of the settled heads' rise, and for aggregate counts bounded by the
    spacing where the fitted rise lies inside one checkpoint interval."""
    x = np.log10(np.asarray(tokens, float))
    direction = 1.0 if ev.get("max_jump", 1.0) is None or not np.isfinite(ev.get("max_jump", 1.0)) \
        else float(np.sign(ev.get("max_jump", 1.0)) or 1.0)
    width, ci, grid = float("nan"), None, None
    if times is not None:
        width, ci = times.width_decades, times.width_ci
    if regime == "identity":
        grid = grid_bounds(tokens, k if flags is None else switched_counts(flags), direction)
    elif times is not None:
        if times.width_is_bound and times.bracket_tokens is not None:
            j = int(np.clip(np.searchsorted(x, np.log10(times.bracket_tokens[0]) - 1e-9), 0, len(x) - 2))
            grid = {"lower": 0.0, "upper": float(x[j + 1] - x[j]), "low_between": [j, j + 1], "high_between": [j, j + 1]}
    shape, reason, wev = width_verdict(width, ci, grid, cfg.sharp_width_decades, [str(r) for r in revisions])
    ev.update(wev)
    if ev.get("max_jump_revisions"):
        a, b = ev["max_jump_revisions"]
        reason += f"; the largest jump ({a} -> {b}) holds {_pct(ev['max_jump_share'])} of the rise"
    return ShapeVerdict(shape, reason, ev)


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
                   boot=None, flags=None) -> ShapeVerdict:
    """Apply the verdict rule of the module docstring to one curve (its rise).

    ``fits``: the four model fits (None: none computed); ``times``: the logistic's
    :class:`~stats.times.TransitionTimes`; ``p_step``: the step test's p-value;
    ``flags``: the heads' flags (revisions x heads) where the counts follow them;
    ``change``: the :func:`stats.change.change_test` result (None: not run, and no
    transition is called); ``regime``: ``identity`` or ``aggregate`` (:data:`REGIMES`);
    ``boot``: the logistic's bootstrap (the aggregate share's interval).
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
        ev["width_decades"] = times.width_decades
        ev["width_is_bound"] = times.width_is_bound
        ev["spacing_decades"] = times.spacing_decades
    ev["p_step"] = p_step
    ev["pure_step"] = None if p_step is None else bool(p_step >= alpha)
    ev["p_change"] = None if change is None else change.p_value
    reason = _none_reason(ev, cfg, fits, change, alpha)
    if reason is not None:
        return ShapeVerdict("none", reason, ev)
    return sharp_or_gradual(ev, cfg, tokens, k, n, revisions, regime, times, flags)


def qualify_verdict(verdict: ShapeVerdict, continuous: dict) -> ShapeVerdict:
    """The verdict's cross-check against the class's continuous metrics.

    ``continuous``: per metric (its mean selectivity, mean first-token attention, induction
    loss) the shape its own rise reads by the grid's bounds of :func:`stats.width.grid_bounds`
    (``reads``). ``continuous_disagrees`` lists the metrics that read the other *resolved*
    shape (a threshold can make a smooth change look sharp, Schaeffer et al. 2023); the
    reason says so. A metric that the grid cannot resolve does not disagree.
    """
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
