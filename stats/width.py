"""Sharp or gradual in the model's own terms: the 10-90 width of a rise, in decades of tokens.

A transition is *sharp* when the rise from 10 % to 90 % of its amplitude takes at most
``C`` decades of training tokens (``analysis.shape.sharp_width_decades``, default 0.5: a
factor of 3.2), *gradual* when it takes more. ``C`` is a property of the model's training,
not of the checkpoints, so the verdict is one the grid can only *resolve* or not:

- *interval of the fit*: the logistic's 10-90 width ``2 ln 9 / s`` with its bootstrap
  percentile interval ``[lo, hi]`` (:mod:`stats.times`; a replicate whose rise fits between
  two adjacent revisions counts as any width from 0 to that spacing);
- *bounds of the grid* (counts that follow the same heads, cumulative up to flicker; with
  the heads' flags, the heads switched on, :func:`stats.switching.switched_counts`): with the
  rise's monotone fit scaled to [0, 1], the 10 % point lies between the last revision below
  0.1 and the next, the 90 % point likewise, so the width lies in ``[x_b - x_a+1, x_b+1 -
  x_a]`` (log10 tokens); for heads, between the 10th and 90th percentiles of their switch-on
  times as :func:`numpy.quantile` interpolates them (:func:`grid_bounds`), as the simulated
  truths define the width. More revisions only narrow these bounds; a rise inside one
  interval of ``s`` decades has ``[0, s]``. The upper bound holds only for a rise inside the
  range: where the fitted 10 % or 90 % point lies outside it, or the heads show the rise
  beginning before or going on after it (:func:`stats.curve_analysis._rise_end_unseen`), it
  is dropped, the fit's included (:func:`stats.shape.sharp_or_gradual`).

For followed heads both count (the heads' switch-on times can show a tail or a second phase
that a symmetric logistic misses: where the two do not overlap, the heads decide and the
reason says so); for aggregate counts (noisy draws) the fit's interval alone, bounded by the
spacing where the fitted rise lies inside one checkpoint interval.
Verdict (:func:`width_verdict`), with ``upper = min(hi, grid upper)`` and ``lower = max(lo,
grid lower)``: ``sharp`` when ``upper <= C`` ("sharp at this resolution" when the bound is
one checkpoint interval), ``gradual`` when ``lower > C``, else ``unresolved`` with what would
tell. A verdict on the grid's bounds never flips when checkpoints are added; one on the fit's
interval can only move to ``unresolved`` by Monte Carlo or fit noise.

Why 0.5 decades (docs/methods.md, section 8): the reference study's sharp case, OLMo-1B's
BOS jump from 7.4 % to 70.3 % between adjacent checkpoints at 117B and 264B tokens, spans
0.35 decades, and induction heads form in a "phase change" over a factor of about 2-3 in
tokens (Olsson et al. 2022, 0.3-0.5 decades); its gradual cases, Pythia-1B's and OLMoE's BOS
ramps, rise over 1.2 decades (fitted) and more. 0.5 decades lies between the two with room on
both sides, and is a setting: a study with another notion of sharp sets its own.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from scipy.special import xlogy

from stats.isotonic import isotonic_fit

#: The quantiles of the rise whose distance is the width.
LOW, HIGH = 0.1, 0.9


def grid_bounds(tokens, values, direction: float = 1.0, heads: bool = False) -> Optional[dict]:
    """Bounds of the 10-90 width of a rise from its values at the revisions (module docstring).

    ``values`` (counts or a continuous metric) are fitted non-decreasing in ``direction``; the
    rise above the first fitted value, ``R_i``, is a cumulative distribution of where it happens:
    rank ``h`` lies between the last revision with ``R <= h`` and the next. The p-quantile has
    rank ``h = p N`` of a rise of ``N`` (a metric: N = 1) or, with ``heads`` (counts of heads
    switched on), ``h = p (N - 1)`` between the heads ranked ``floor(h)`` and ``ceil(h)``,
    interpolated as :func:`numpy.quantile` does. Each quantile lies in ``[q_lo, q_hi]``, so the
    width lies in ``[q90_lo - q10_hi, q90_hi - q10_lo]`` (at least 0). Returns ``{"lower",
    "upper", "low_between", "high_between"}`` (decades; the revisions bracketing the 10 % and
    90 % points), or None without a rise."""
    x = np.log10(np.asarray(tokens, float))
    v = np.asarray(values, float) * (1.0 if direction >= 0 else -1.0)
    if len(v) < 2 or not np.all(np.isfinite(v)):
        return None
    fit = isotonic_fit(v, np.ones_like(v))[0]
    rise = fit - fit[0]
    n = float(rise[-1])
    if n <= 0:
        return None
    if not heads:
        rise, n = rise / n, 1.0

    def after(rank: float) -> int:  # the first revision whose rise exceeds ``rank``
        return int(np.flatnonzero(rise > rank + 1e-9 * n)[0])

    def quantile(p: float) -> tuple:
        h = p * (n - 1) if heads and n > 1 else p * n
        ranks = (np.floor(h), np.ceil(h)) if heads else (h, h)
        i, j = after(min(ranks[0], n - 1e-6 * n)), after(min(ranks[1], n - 1e-6 * n))
        f = h - ranks[0]
        return (1 - f) * x[i - 1] + f * x[j - 1], (1 - f) * x[i] + f * x[j], [i - 1, j]

    lo10, hi10, low_between = quantile(LOW)
    lo90, hi90, high_between = quantile(HIGH)
    lower = lo90 - hi10
    return {"lower": float(lower if lower > 1e-12 else 0.0), "upper": float(hi90 - lo10),
            "low_between": low_between, "high_between": high_between}


def _fmt(v: float) -> str:
    return f"{v:.2g}"


def width_verdict(width: float, ci, grid: Optional[dict], criterion: float, revisions) -> tuple:
    """``(shape, reason, evidence)`` of the width rule (module docstring).

    ``width``: the fitted 10-90 width (decades), ``ci`` its interval (``[lo, hi]``, either
    end may be nan), ``grid``: :func:`grid_bounds` or None, ``revisions``: the names the
    grid's indices refer to."""
    lo, hi = (float("nan"), float("nan")) if ci is None else (float(ci[0]), float(ci[1]))
    g_lo, g_hi = (0.0, float("inf")) if grid is None else (grid["lower"], grid["upper"])
    lower = max(v for v in (lo, g_lo) if np.isfinite(v)) if np.isfinite(lo) or np.isfinite(g_lo) else 0.0
    upper = min(v for v in (hi, g_hi) if np.isfinite(v)) if np.isfinite(hi) or np.isfinite(g_hi) else float("inf")
    ev = {"width_lower": lower, "width_upper": upper, "width_grid": None if grid is None else [g_lo, g_hi],
          "sharp_width_decades": criterion}
    c = _fmt(criterion)
    one_interval = (grid is not None and not grid.get("beyond") and grid["low_between"] == grid["high_between"]
                    and grid["low_between"][1] - grid["low_between"][0] == 1)  # both points between two adjacent revisions
    where = ""
    if grid is not None:
        a, b = grid["low_between"][0], grid["high_between"][1]
        where = f"{revisions[a]} -> {revisions[b]}"
    fitted = "no fitted width"
    if np.isfinite(width):  # its interval where the bootstrap gave one
        interval = f" [{_fmt(lo)}, {_fmt(hi)}]" if np.isfinite(lo) or np.isfinite(hi) else " (no interval)"
        fitted = f"fitted 10-90 width {_fmt(width)} decades{interval}"
    misfit = ""
    if upper < lower - 1e-9:  # the fit's interval and the heads' own switch-on times do not overlap
        lower, upper = g_lo, g_hi
        ev.update(width_lower=lower, width_upper=upper)
        misfit = (f"; the heads' switch-on times decide: the logistic ({fitted}) misses a tail or a second phase "
                  "of the rise")
    if upper <= criterion + 1e-9:
        ev["resolution"] = "bound" if one_interval and g_hi <= upper + 1e-9 else "resolved"
        if ev["resolution"] == "bound":
            return "sharp", (f"sharp at this resolution: the rise lies within one checkpoint interval ({where}), "
                             f"so its 10-90 width is <= {_fmt(upper)} decades <= {c}"), ev
        return "sharp", f"sharp: 10-90 width <= {_fmt(upper)} decades <= {c} ({fitted}){misfit}", ev
    if lower > criterion + 1e-9:
        ev["resolution"] = "resolved"
        span = f"; the rise spans {where}" if where else ""
        return "gradual", f"gradual: 10-90 width >= {_fmt(lower)} decades > {c} ({fitted}{span}){misfit}", ev
    ev["resolution"] = "unresolved"
    if one_interval:
        return "unresolved", (f"unresolved: the rise lies within one checkpoint interval ({where}) of "
                              f"{_fmt(g_hi)} decades, wider than the criterion {c}: width <= {_fmt(upper)} decades; "
                              f"refine between {where.replace(' -> ', ' and ')}"), ev
    return "unresolved", (f"unresolved: the width lies between {_fmt(lower)} and {_fmt(upper)} decades, on both sides "
                          f"of the criterion {c} ({fitted}); more revisions around the rise"
                          + (f" ({where})" if where else "") + f" or more heads would tell{misfit}"), ev


def _logistic_basis(x, slopes, midpoints: int = 161) -> np.ndarray:
    """``expit(s (x - x50))`` (slopes, midpoints, revisions) for each of ``slopes`` and ``midpoints``
    midpoints over the range of ``x`` and a range's width either side: the shapes
    :func:`_profile_fits` fits, computed once for every fit on the same grid."""
    span = max(float(x[-1] - x[0]), 0.1)
    x50 = np.linspace(x[0] - span, x[-1] + span, midpoints)
    return 1.0 / (1.0 + np.exp(-np.clip(slopes[:, None, None] * (x[None, None, :] - x50[None, :, None]), -50, 50)))


def _profile_fits(g, y, w) -> np.ndarray:
    """The fitted values of the least weighted squared error fit of ``floor + amplitude g`` for each
    shape ``g`` of :func:`_logistic_basis` (a slope and a midpoint) to a rise of fractions ``y``,
    under ``floor >= 0``, ``amplitude >= 0``, ``floor + amplitude <= 1``. ``w``: weights a
    revision (or also a slope and midpoint). Given the shape this is a two-parameter weighted least
    squares under three linear constraints: the unconstrained solution where feasible, else the
    best on an edge (clipped) or a vertex."""
    w = np.broadcast_to(w, g.shape)
    wg = w * g
    sw, swg, swgg = w.sum(-1), wg.sum(-1), np.einsum("...k,...k->...", wg, g)
    swy, swgy, swyy = w @ y, wg @ y, w @ (y * y)
    det = sw * swgg - swg**2
    ok = det > 1e-12 * sw * sw
    c = np.where(ok, (sw * swgy - swg * swy) / np.where(ok, det, 1.0), 0.0)
    a = (swy - c * swg) / sw
    # on the edge floor + amplitude = 1: y - g = floor (1 - g), by sums of w (1 - g)^2 and w (1 - g) (y - g)
    swhh = sw - 2 * swg + swgg
    edge_top = np.clip((swy - swg - swgy + swgg) / np.maximum(swhh, 1e-300), 0.0, 1.0)
    candidates = [(a, c),  # interior
                  (np.zeros_like(a), np.clip(swgy / np.maximum(swgg, 1e-300), 0.0, 1.0)),  # floor 0
                  (np.clip(swy / sw, 0.0, 1.0), np.zeros_like(a)),  # flat
                  (edge_top, 1.0 - edge_top)]  # reaching 1
    best, floor, amplitude = np.full(a.shape, np.inf), np.zeros_like(a), np.zeros_like(a)
    for fa, fc in candidates:  # sum w (y - fa - fc g)^2, expanded in the sums above
        feasible = (fa >= -1e-12) & (fc >= -1e-12) & (fa + fc <= 1 + 1e-12)
        ss = swyy - 2 * (fa * swy + fc * swgy) + fa * fa * sw + 2 * fa * fc * swg + fc * fc * swgg
        better = feasible & (ss < best)
        best, floor, amplitude = np.where(better, ss, best), np.where(better, fa, floor), np.where(better, fc, amplitude)
    return floor[..., None] + amplitude[..., None] * g


def _profile_deviance(g, y, n, p, rounds: int = 2) -> tuple:
    """The binomial deviance of the best logistic rise for each shape ``g`` (a slope and midpoint:
    :func:`_profile_fits`) for fractions ``y`` of ``n`` heads, and its fitted levels. For each slope
    and midpoint the floor and amplitude are fitted by iterated reweighting: weighted least squares
    with weights ``n / (mu (1 - mu))``, first at the levels ``p``, then ``rounds`` times at the
    candidate's own fitted levels ``mu`` (kept half a head from 0 and from ``n``), whose fixed point
    solves the binomial score equations; the deviance ``2 sum [k log(k / n mu) + (n - k) log((n - k)
    / n (1 - mu))]`` of the last fit is its likelihood ratio against the saturated model, so that a
    candidate that puts heads where the counts are zero pays what the likelihood charges (a weighted
    squared error charges a zero count half of it)."""
    mu = _profile_fits(g, y, n / (p * (1 - p)))
    for _ in range(rounds):
        m = np.clip(mu, 0.5 / n, 1 - 0.5 / n)
        mu = _profile_fits(g, y, n / (m * (1 - m)))
    mu = np.clip(mu, 1e-12, 1 - 1e-12)
    return (2 * n * (xlogy(y, y) - xlogy(y, mu) + xlogy(1 - y, 1 - y) - xlogy(1 - y, 1 - mu))).sum(-1), mu


def _boundary_stat(g, y, n, held) -> tuple:
    """The deviance by which the best rise of the ``held`` slopes (a mask of the first axis of the
    shapes ``g``) fits the rise ``y`` worse than the best of all, and the held fit's levels; the
    reweighted fits start from the non-decreasing fit's levels (:func:`stats.isotonic.isotonic_fit`),
    kept in [0.01, 0.99]."""
    dev, mu = _profile_deviance(g, y, n, np.clip(isotonic_fit(y, n)[0], 0.01, 0.99))
    dev_held, mu_held = dev[held], mu[held]
    best = np.unravel_index(int(np.argmin(dev_held)), dev_held.shape)
    return max(float(dev_held[best] - dev.min()), 0.0), mu_held[best]


def boundary_p(tokens, k, n, phi: float, criterion: float, shape: str,
               rng: Optional[np.random.Generator] = None, n_sim: int = 39, stop_after: int = 5) -> float:
    """How well a rise of 10-90 width exactly ``criterion`` (the boundary of the claim ``shape``)
    fits besides the best rise of any width: a parametric bootstrap p-value of ``D_C - D_free``,
    where ``D`` is the binomial deviance (:func:`_profile_deviance`) of the best logistic with its
    width held on the claim's boundary side (``sharp``: width >= C, the gentlest alternative the
    claim excludes; ``gradual``: width <= C, down to a step) and of the best of any width. A claim
    whose boundary fits about as well is one the noise does not establish.

    The null distribution is simulated: ``n_sim`` draws of counts from the held fit, beta-binomial
    at the dispersion ``phi`` (intra-class correlation ``(phi - 1) / (n - 1)``), each refitted both
    ways; ``p = (1 + #{D* >= D}) / (1 + draws)``, stopping once ``stop_after`` draws reach the
    observed difference (Besag and Clifford's sequential p-value). The size is exact for any
    ``n_sim`` (``analysis.shape.boundary_draws``, default 39); the power near alpha is not: with 39
    draws a rise whose exact p is 0.02 is claimed in 81 % of analyses, against 95 % with 99 draws,
    which cost up to 2.5x the time; on the sampled space the two read the same
    (benchmarks/bench_shape_oc.py, seeds 0 and 1), so the default stays at 39. Not chi-square(1):
    a step's midpoint between two revisions is not identified, and at the boundary the halved
    chi-square(1) rejected 8 to 18 % of rises of width C at the 5 % level."""
    x = np.log10(np.asarray(tokens, float))
    n = np.asarray(n, float)
    y = np.asarray(k, float) / n
    if y[-1] < y[0]:
        y = 1.0 - y  # a fall of the share is a rise of its complement
    s_c = 2 * np.log(9.0) / criterion
    span = max(float(x[-1] - x[0]), 0.1)
    gentle = np.geomspace(2 * np.log(9.0) / (10 * span), s_c, 16)
    steep = np.geomspace(s_c, 2 * np.log(9.0) / 1e-3, 16)
    slopes = np.concatenate([gentle, steep])
    held = np.arange(slopes.size) < gentle.size if shape == "sharp" else np.arange(slopes.size) >= gentle.size
    g = _logistic_basis(x, slopes)
    stat, mu = _boundary_stat(g, y, n, held)
    if stat <= 0:
        return 1.0
    rng = np.random.default_rng(0) if rng is None else rng
    rho = np.clip((max(phi, 1.0) - 1.0) / np.maximum(n - 1.0, 1.0), 0.0, 0.99)
    reached = 0
    for draw in range(1, n_sim + 1):
        level = mu
        if rho.any():  # beta-binomial: each revision's level drawn around the fit's
            r = np.maximum(rho, 1e-12)
            level = np.where(rho > 0, rng.beta(mu * (1 - r) / r, (1 - mu) * (1 - r) / r), mu)
        y_sim = rng.binomial(n.astype(int), np.clip(level, 0.0, 1.0)) / n
        reached += _boundary_stat(g, y_sim, n, held)[0] >= stat
        if reached >= stop_after:
            return reached / draw
    return (1 + reached) / (1 + n_sim)
