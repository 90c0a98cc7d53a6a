"""Shape-constrained least squares: monotone and unimodal fits of a curve's fractions.

With weights ``w_j`` (the ``n_j`` heads) and fractions ``y_j = k_j / n_j``:

- :func:`isotonic_fit`: the weighted least-squares non-decreasing fit (the
  pool-adjacent-violators solution, also the binomial maximum-likelihood monotone
  fit), by the max-min formula for many rows at once;
- :func:`unimodal_fit`: non-decreasing up to a mode and non-increasing after it,
  the best split kept; :func:`unimodal_ss` its squared error (and that of the
  non-decreasing fit) by one prefix and one suffix pass a row, for permutation tests;
- :func:`explained_share`: the share of the weighted variance of ``y`` that the best
  fit of a family explains, ``(SS0 - SS_fit) / SS0``: :func:`monotone_r2` (up or
  down) and :func:`unimodal_r2` (rise-then-fall or fall-then-rise), the statistics of
  the change tests (:func:`stats.shape.level_change_test`).
"""

from __future__ import annotations

import numpy as np

#: The max-min formula works on (rows, m, m) arrays: rows are taken this many cells at a time.
MAX_CELLS = 2_000_000


def isotonic_fit(y, w):
    """Weighted least-squares non-decreasing fit of ``y`` (B, m) with weights ``w`` (B, m).

    The max-min formula ``fit_i = max_{a <= i} min_{b >= i} M(a, b)``, ``M(a, b)`` the
    weighted mean of ``y_a .. y_b`` (the pool-adjacent-violators solution, which is
    also the binomial maximum-likelihood monotone fit), for all rows at once.
    """
    y = np.atleast_2d(np.asarray(y, float))
    w = np.broadcast_to(np.asarray(w, float), y.shape)
    m = y.shape[-1]
    rows = max(1, MAX_CELLS // (m * m))
    if y.ndim == 2 and y.shape[0] > rows:  # (B, m, m) work arrays: a few MB at a time
        return np.concatenate([isotonic_fit(y[i:i + rows], w[i:i + rows]) for i in range(0, y.shape[0], rows)])
    cwy = np.concatenate([np.zeros(y.shape[:-1] + (1,)), np.cumsum(w * y, -1)], -1)
    cw = np.concatenate([np.zeros(y.shape[:-1] + (1,)), np.cumsum(w, -1)], -1)
    a, b = np.meshgrid(np.arange(m), np.arange(m), indexing="ij")
    valid = b >= a
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = (cwy[..., b + 1] - cwy[..., a]) / (cw[..., b + 1] - cw[..., a])
    mean = np.where(valid, np.nan_to_num(mean, nan=0.0), np.inf)
    cmin = np.minimum.accumulate(mean[..., ::-1], axis=-1)[..., ::-1]  # (B, a, i): min over b >= i
    cmin = np.where(valid, cmin, -np.inf)  # only a <= i
    return cmin.max(-2)


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


def explained_share(k, n, fit_ss) -> np.ndarray:
    """``(SS0 - SS_fit) / SS0`` of rows ``k`` (B, m) of ``n``, ``fit_ss(y, w)`` the (B,) errors of a
    fit family, ``SS0`` around the pooled fraction; 0 for a constant row."""
    k = np.atleast_2d(np.asarray(k, float))
    n = np.broadcast_to(np.asarray(n, float), k.shape)
    w = np.where(n > 0, n, 0.0)
    y = k / np.where(n > 0, n, 1)
    ybar = (w * y).sum(-1, keepdims=True) / np.maximum(w.sum(-1, keepdims=True), 1e-300)
    ss0 = (w * (y - ybar) ** 2).sum(-1)
    ss = fit_ss(y, w)
    return np.where(ss0 > 0, (ss0 - ss) / np.where(ss0 > 0, ss0, 1), 0.0)


def monotone_r2(k, n):
    """Share of the weighted variance of ``k/n`` explained by the best monotone fit (up or down):
    ``T = max(SS0 - SS_up, SS0 - SS_down) / SS0`` (:func:`isotonic_fit`). Rows of (B, m) arrays."""

    def ss(y, w):
        up, down = isotonic_fit(y, w), -isotonic_fit(-y, w)
        return np.minimum(_weighted_ss(y, w, up), _weighted_ss(y, w, down))

    return explained_share(k, n, ss)


def unimodal_r2(k, n):
    """Share of the weighted variance of ``k/n`` explained by the best unimodal fit (rise then
    fall, or fall then rise; :func:`unimodal_fit`). Rows of (B, m) arrays."""
    return explained_share(k, n, lambda y, w: np.minimum(unimodal_ss(y, w)[0], unimodal_ss(-y, w)[0]))


