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
  fit of a family explains, ``(SS0 - SS_fit) / SS0``, e.g. :func:`monotone_r2` (up or down).
"""

from __future__ import annotations

import numpy as np

from stats.models.base import batch_counts

#: The max-min formula works on (rows, m, m) arrays: rows are taken this many cells at a time.
MAX_CELLS = 2_000_000
#: Rows longer than this are fitted by :func:`pava_fit` (O(m) steps) instead of the max-min formula (O(m^2) cells).
PAVA_FROM = 24


def isotonic_fit(y, w):
    """Weighted least-squares non-decreasing fit of rows ``y`` (B, m) by the max-min formula
    ``fit_i = max_{a <= i} min_{b >= i} M(a, b)``, ``M(a, b)`` the weighted mean of ``y_a .. y_b``
    (the pool-adjacent-violators solution, also the binomial maximum-likelihood monotone fit)."""
    y, w = batch_counts(y, w)
    m = y.shape[-1]
    if m > PAVA_FROM and y.ndim == 2:  # long rows: the vectorised pool-adjacent-violators pass (the same fit) is faster
        return pava_fit(y, w)
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


def unimodal_fit(y, w):
    """Unimodal weighted least-squares fit of rows ``y`` (B, m): ``(fit, ss, ss_increasing)``, the
    fits, their weighted squared errors and those of the non-decreasing fit alone. The best split
    (the first of equal ones; none unless better by 1e-12) from the prefix and suffix errors
    (:func:`prefix_isotonic_ss`), each side fitted by :func:`pava_fit` (the other side weighted 0)."""
    y, w = batch_counts(y, w)
    m = y.shape[-1]
    prefix = prefix_isotonic_ss(y, w)
    up, ss_up = pava_fit(y, w), np.maximum(prefix[:, -1], 0.0)
    if m < 2:
        return up, ss_up, ss_up
    splits = _split_ss(y, w, prefix)
    c = np.argmax(splits <= splits.min(-1, keepdims=True) + 1e-12, -1) + 1  # non-decreasing on [0, c), non-increasing after
    split = splits.min(-1) < prefix[:, -1] - 1e-12
    left_side = np.arange(m)[None, :] < c[:, None]
    left = pava_fit(y, np.where(left_side, w, 0.0))
    right = pava_fit(y[:, ::-1], np.where(left_side, 0.0, w)[:, ::-1])[:, ::-1]  # non-increasing: reversed, non-decreasing
    fit = np.where(split[:, None], np.where(left_side, left, right), up)
    return fit, np.maximum(np.where(split, splits.min(-1), prefix[:, -1]), 0.0), ss_up


def _pava(y, w) -> tuple:
    """One pool-adjacent-violators pass over the columns of rows ``y`` (B, m), weights ``w``, all
    rows at once. Each row's blocks are kept on a stack as *cumulative* sums ``W, WY, WYY`` (slot
    ``s`` holds the sums of blocks 1..s; slot 0 is empty) with the cumulative error of the blocks
    (a block's error is ``WYY - WY^2 / W``) and each block's first column. A new point pools with
    the top blocks while the block below has the higher mean; block means rise up the stack, so
    where it pools at all the blocks to pool are found by bisection (O(log m) numpy steps a
    column, whatever the depth). A single row goes through a plain loop (fewer steps).
    Returns the error of the non-decreasing fit of every prefix (B, m), and the final stack
    ``(cumulative sums (3, B, m + 1), first columns (B, m + 1), top slot (B,))``."""
    y, w = batch_counts(y, w)
    n_rows, m = y.shape
    if n_rows == 1:
        return _pava_row(y[0], w[0])
    cum = np.zeros((3, n_rows, m + 1))
    cum_err = np.zeros((n_rows, m + 1))
    first = np.zeros((n_rows, m + 1), int)
    top = np.zeros(n_rows, int)
    out = np.empty((n_rows, m))
    every = np.arange(n_rows)

    def pools(rows, s, new):
        """Whether block ``s`` (>= 1) of ``rows`` has a higher mean than the sums above it and the new point."""
        bW, bWY = cum[0, rows, s] - cum[0, rows, s - 1], cum[1, rows, s] - cum[1, rows, s - 1]
        mW, mWY = new[0, rows] - cum[0, rows, s], new[1, rows] - cum[1, rows, s]
        return bWY * mW > mWY * bW

    for i in range(m):
        new = cum[:, every, top] + np.stack([w[:, i], w[:, i] * y[:, i], w[:, i] * y[:, i] * y[:, i]])
        keep = top.copy()  # the top slot kept (below the merged block)
        rows = np.flatnonzero(top >= 1)
        rows = rows[pools(rows, top[rows], new)]
        lo, hi = np.zeros(rows.size, int), top[rows]  # block lo is kept (0: none), block hi pooled
        while rows.size and np.any(hi - lo > 1):
            mid = (lo + hi) // 2
            p = pools(rows, np.maximum(mid, 1), new) & (mid >= 1)
            lo, hi = np.where(p, lo, mid), np.where(p, mid, hi)
        keep[rows] = lo
        merged = new - cum[:, every, keep]
        start = np.where(keep < top, first[every, np.minimum(keep + 1, m)], i)
        top = keep + 1
        cum[:, every, top] = new
        cum_err[every, top] = cum_err[every, keep] + _block_error(*merged)
        first[every, top] = start
        out[:, i] = cum_err[every, top]
    return out, (cum, first, top)


def _block_error(W, WY, WYY):
    """A block's weighted squared error around its mean, ``WYY - WY^2 / W`` (0 for no weight)."""
    return np.where(W > 0, WYY - WY * WY / np.where(W > 0, W, 1.0), 0.0)


def _pava_row(y, w) -> tuple:
    """:func:`_pava` of one row by a plain loop (the same stack layout, one row)."""
    m = len(y)
    cum = np.zeros((3, 1, m + 1))
    first = np.zeros((1, m + 1), int)
    out = np.empty((1, m))
    stack = [(0.0, 0.0, 0.0, 0.0, 0)]  # cumulative W, WY, WYY, error; first column
    for i, (wi, yi) in enumerate(zip(w.tolist(), y.tolist())):
        cW, cWY, cWYY = stack[-1][0] + wi, stack[-1][1] + wi * yi, stack[-1][2] + wi * yi * yi
        start = i
        while len(stack) > 1:
            (bW, bWY, _, _, bfirst), below = stack[-1], stack[-2]
            bW, bWY = bW - below[0], bWY - below[1]
            if not bWY * (cW - stack[-1][0]) > (cWY - stack[-1][1]) * bW:
                break
            start = bfirst
            stack.pop()
        below = stack[-1]
        W, WY, WYY = cW - below[0], cWY - below[1], cWYY - below[2]
        err = below[3] + (WYY - WY * WY / W if W > 0 else 0.0)
        stack.append((cW, cWY, cWYY, err, start))
        out[0, i] = err
    for s, (cW, cWY, cWYY, _, start) in enumerate(stack[1:], start=1):
        cum[:, 0, s] = cW, cWY, cWYY
        first[0, s] = start
    return out, (cum, first, np.array([len(stack) - 1]))


def prefix_isotonic_ss(y, w) -> np.ndarray:
    """Weighted squared error (B, m) of the non-decreasing fit of ``y[:, :c + 1]`` for every ``c``, by
    one vectorised pool-adjacent-violators pass (:func:`_pava`; no O(m^2) memory)."""
    return _pava(y, w)[0]


def pava_fit(y, w) -> np.ndarray:
    """:func:`isotonic_fit`'s fit of rows ``y`` (B, m) by one vectorised pool-adjacent-violators pass
    (:func:`_pava`). A block of zero weight never pools: points weighted 0 after the others leave
    their fit unchanged (and are 0 themselves)."""
    y = np.atleast_2d(np.asarray(y, float))
    n_rows, m = y.shape
    _, (cum, first, top) = _pava(y, w)
    slots = np.arange(m + 1)[None, :]
    starts = np.zeros((n_rows, m + 1), bool)
    rows, cols = np.nonzero((slots >= 1) & (slots <= top[:, None]))
    starts[rows, first[rows, cols]] = True
    block = np.cumsum(starts[:, :m], -1)  # each column's slot
    W = np.take_along_axis(cum[0], block, -1) - np.take_along_axis(cum[0], block - 1, -1)
    WY = np.take_along_axis(cum[1], block, -1) - np.take_along_axis(cum[1], block - 1, -1)
    return np.where(W > 0, WY / np.where(W > 0, W, 1.0), 0.0)


def _split_ss(y, w, up) -> np.ndarray:
    """Errors (B, m - 1) of the fits non-decreasing on [0, c) and non-increasing on [c, m), c = 1 .. m-1,
    from the prefix errors ``up`` of :func:`prefix_isotonic_ss`."""
    m = y.shape[-1]
    down = prefix_isotonic_ss(y[:, ::-1], w[:, ::-1])  # down[:, j]: non-increasing on the last j + 1
    return up[:, :-1] + down[:, : m - 1][:, ::-1]


def unimodal_ss(y, w) -> tuple:
    """``(ss_unimodal, ss_increasing)`` of rows ``y`` (B, m): the errors of :func:`unimodal_fit`
    and of the non-decreasing fit, by one prefix and one suffix pass (:func:`prefix_isotonic_ss`)."""
    y, w = batch_counts(y, w)
    up = prefix_isotonic_ss(y, w)  # up[:, c]: non-decreasing on [0, c]
    ss_up = np.maximum(up[:, -1], 0.0)
    if y.shape[-1] < 2:
        return ss_up, ss_up
    return np.maximum(np.minimum(up[:, -1], _split_ss(y, w, up).min(-1)), 0.0), ss_up


def weighted_fractions(k, n) -> tuple:
    """``(n, w, y, pooled)`` of rows ``k`` (B, m) of ``n``: ``n`` broadcast to the rows, the weights
    (``n``, 0 where not positive), the fractions ``k / n`` and each row's pooled fraction (B, 1)."""
    k, n = batch_counts(k, n)
    w = np.where(n > 0, n, 0.0)
    y = k / np.where(n > 0, n, 1)
    return n, w, y, (w * y).sum(-1, keepdims=True) / np.maximum(w.sum(-1, keepdims=True), 1e-300)


def explained_share(k, n, fit_ss) -> np.ndarray:
    """``(SS0 - SS_fit) / SS0`` of rows ``k`` (B, m) of ``n``, ``fit_ss(y, w)`` the (B,) errors of a
    fit family, ``SS0`` around the pooled fraction; 0 for a constant row (SS0 within rounding of 0)."""
    _, w, y, ybar = weighted_fractions(k, n)
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
