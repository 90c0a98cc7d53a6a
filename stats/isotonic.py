"""Shape-constrained least squares: monotone and unimodal fits of a curve's fractions.

With weights ``w_j`` (the ``n_j`` heads) and fractions ``y_j = k_j / n_j``:

- :func:`isotonic_fit`: the weighted least-squares non-decreasing fit (the
  pool-adjacent-violators solution, also the binomial maximum-likelihood monotone
  fit), by the max-min formula for many rows at once;
- :func:`unimodal_fit`: non-decreasing up to a mode and non-increasing after it,
  the best split kept; :func:`unimodal_ss` its squared error (and that of the
  non-decreasing fit) by one prefix and one suffix pass (:func:`prefix_isotonic_ss`, all rows
  at once), for permutation tests;
- :func:`explained_share`: the share of the weighted variance of ``y`` that the best
  fit of a family explains, ``(SS0 - SS_fit) / SS0``: :func:`monotone_r2` (up or
  down) and :func:`unimodal_r2` (rise-then-fall or fall-then-rise), the statistics of
  the change tests (:func:`stats.shape.level_change_test`).
"""

from __future__ import annotations

import numpy as np


def isotonic_fit(y, w):
    """Weighted least-squares non-decreasing fit of ``y`` (B, m) with weights ``w`` (B, m).

    The max-min formula ``fit_i = max_{a <= i} min_{b >= i} M(a, b)``, ``M(a, b)`` the
    weighted mean of ``y_a .. y_b`` (the pool-adjacent-violators solution, which is
    also the binomial maximum-likelihood monotone fit), for all rows at once.
    """
    y = np.atleast_2d(np.asarray(y, float))
    w = np.broadcast_to(np.asarray(w, float), y.shape)
    m = y.shape[-1]
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


def prefix_isotonic_ss(y, w) -> np.ndarray:
    """Weighted squared error of the non-decreasing fit of ``y[:, :c + 1]`` for every ``c``, rows
    ``y`` (B, m) with weights ``w``: (B, m). One pool-adjacent-violators pass over the columns for
    all rows at once (blocks kept as sums ``W, WY, WYY`` on a stack a row; a block's error is
    ``WYY - WY^2 / W``); O(m) numpy steps (times the deepest pooling), not O(m^2) memory."""
    y = np.atleast_2d(np.asarray(y, float))
    w = np.broadcast_to(np.asarray(w, float), y.shape)
    n_rows, m = y.shape
    stack = np.zeros((3, n_rows, m + 1))  # W, WY, WYY of each row's blocks; slot 0 stays empty
    top = np.zeros(n_rows, int)  # the top block's slot (0: no block)
    total, out = np.zeros(n_rows), np.empty((n_rows, m))

    def error(W, WY, WYY):
        return np.where(W > 0, WYY - WY * WY / np.where(W > 0, W, 1.0), 0.0)

    for i in range(m):
        W, WY = w[:, i].copy(), w[:, i] * y[:, i]
        WYY = WY * y[:, i]
        rows = np.flatnonzero(top > 0)
        while rows.size:  # pool while the previous block's mean is higher
            pW, pWY, pWYY = stack[:, rows, top[rows]]
            pool = pWY * W[rows] > WY[rows] * pW
            rows, pW, pWY, pWYY = rows[pool], pW[pool], pWY[pool], pWYY[pool]
            total[rows] -= error(pW, pWY, pWYY)
            W[rows] += pW
            WY[rows] += pWY
            WYY[rows] += pWYY
            top[rows] -= 1
            rows = rows[top[rows] > 0]
        top += 1
        stack[:, np.arange(n_rows), top] = W, WY, WYY
        total += error(W, WY, WYY)
        out[:, i] = total
    return out


def unimodal_ss(y, w) -> tuple:
    """``(ss_unimodal, ss_increasing)`` of rows ``y`` (B, m): the errors of :func:`unimodal_fit`
    and of the non-decreasing fit, by one prefix and one suffix pass (:func:`prefix_isotonic_ss`)."""
    y = np.atleast_2d(np.asarray(y, float))
    w = np.broadcast_to(np.asarray(w, float), y.shape)
    up = prefix_isotonic_ss(y, w)  # up[:, c]: non-decreasing on [0, c]
    ss_up = up[:, -1]
    if y.shape[-1] < 2:
        return np.maximum(ss_up, 0.0), np.maximum(ss_up, 0.0)
    down = prefix_isotonic_ss(y[:, ::-1], w[:, ::-1])  # down[:, j]: non-increasing on the last j + 1
    m = y.shape[-1]
    splits = up[:, :-1] + down[:, : m - 1][:, ::-1]  # non-decreasing on [0, c), non-increasing on [c, m), c = 1 .. m-1
    return np.maximum(np.minimum(ss_up, splits.min(-1)), 0.0), np.maximum(ss_up, 0.0)


def explained_share(k, n, fit_ss) -> np.ndarray:
    """``(SS0 - SS_fit) / SS0`` of rows ``k`` (B, m) of ``n``, ``fit_ss(y, w)`` the (B,) errors of a
    fit family, ``SS0`` around the pooled fraction; 0 for a constant row (SS0 within rounding of 0)."""
    k = np.atleast_2d(np.asarray(k, float))
    n = np.broadcast_to(np.asarray(n, float), k.shape)
    w = np.where(n > 0, n, 0.0)
    y = k / np.where(n > 0, n, 1)
    ybar = (w * y).sum(-1, keepdims=True) / np.maximum(w.sum(-1, keepdims=True), 1e-300)
    ss0 = (w * (y - ybar) ** 2).sum(-1)
    varies = ss0 > 1e-12 * (w * y * y).sum(-1)  # a constant row's SS0 is rounding noise
    ss = fit_ss(y, w)
    return np.where(varies, np.clip((ss0 - ss) / np.where(varies, ss0, 1), 0.0, 1.0), 0.0)


def monotone_r2(k, n):
    """Share of the weighted variance of ``k/n`` explained by the best monotone fit (up or down):
    ``T = max(SS0 - SS_up, SS0 - SS_down) / SS0`` (the errors by :func:`prefix_isotonic_ss`). Rows of (B, m) arrays."""

    def ss(y, w):
        up, down = prefix_isotonic_ss(y, w)[:, -1], prefix_isotonic_ss(-y, w)[:, -1]
        return np.maximum(np.minimum(up, down), 0.0)

    return explained_share(k, n, ss)


def unimodal_r2(k, n):
    """Share of the weighted variance of ``k/n`` explained by the best unimodal fit (rise then
    fall, or fall then rise; :func:`unimodal_fit`). Rows of (B, m) arrays."""
    return explained_share(k, n, lambda y, w: np.minimum(unimodal_ss(y, w)[0], unimodal_ss(-y, w)[0]))


