"""Four-parameter logistic in log10 tokens.

    p(x) = floor + (ceiling - floor) * expit(slope * (x - x50)),   x = log10 tokens,

``floor`` is the level long before the transition, ``ceiling`` long after (below the
floor for a falling curve), ``x50 = log10 t50`` the midpoint and ``slope > 0`` the
steepness in logits per decade. The 10-90 width of the rise is
``2 ln 9 / slope`` decades; the onset (10 % of the rise) is ``x50 - ln 9 / slope``,
the saturation (90 %) ``x50 + ln 9 / slope``.

Internal parameters ``theta = (logit floor, logit ceiling, x50, log slope)`` in a
box: logits in [-18, 18]; ``x50`` within one data span of the observed range;
``slope`` between a width of ten data spans and a width of 4.4 % of the smallest
checkpoint gap. At the upper slope bound the curve is an exact step between two
revisions, so the logistic nests the step model (its closure): the log-likelihood
ratio of logistic over step is >= 0, which the starts below guarantee.

Starts: for every gap between adjacent revisions, the step fitted there (levels =
pooled fractions on each side) at the steepest slope, the same levels at a moderate
slope, and the observed extremes at a gentle slope; the best few by likelihood, and
the best of each of the three kinds, are refined by Levenberg-Marquardt and the best
result kept (from the step limit the slope's gradient vanishes, so a gradual rise
must be reached from a moderate or gentle start).
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit

from stats.models.base import (
    LOGIT_BOUND,
    BatchFit,
    CurveModel,
    batch_counts,
    binomial_loglik,
    fisher_information,
    levenberg_marquardt,
    log_binom_coef,
    logit,
)

LN9 = float(np.log(9.0))


def logistic_bounds(x):
    """Box (lower, upper) of the internal parameters for revisions at ``x``."""
    x = np.asarray(x, float)
    span = max(float(x.max() - x.min()), 0.1)
    gaps = np.diff(np.sort(x))
    gaps = gaps[gaps > 0]
    min_gap = float(gaps.min()) if gaps.size else span
    s_min = 2 * LN9 / (10 * span)
    s_max = max(100.0 / min_gap, 10 * s_min)
    lower = np.array([-LOGIT_BOUND, -LOGIT_BOUND, x.min() - span, np.log(s_min)])
    upper = np.array([LOGIT_BOUND, LOGIT_BOUND, x.max() + span, np.log(s_max)])
    return lower, upper


def logistic_mean(theta, x):
    """p (P, m) for internal parameters (P, 4), without the Jacobian (:func:`logistic_mean_jac`)."""
    a = expit(theta[:, 0])[:, None]
    b = expit(theta[:, 1])[:, None]
    return a + (b - a) * expit(np.exp(theta[:, 3])[:, None] * (x[None, :] - theta[:, 2][:, None]))


def logistic_mean_jac(theta, x):
    """p (P, m) and dp/dtheta (P, m, 4) for internal parameters (P, 4)."""
    a = expit(theta[:, 0])[:, None]
    b = expit(theta[:, 1])[:, None]
    mu = theta[:, 2][:, None]
    s = np.exp(theta[:, 3])[:, None]
    z = s * (x[None, :] - mu)
    g = expit(z)
    p = a + (b - a) * g
    gg = g * (1 - g)
    J = np.empty(p.shape + (4,))
    J[..., 0] = a * (1 - a) * (1 - g)
    J[..., 1] = b * (1 - b) * g
    J[..., 2] = -(b - a) * s * gg
    J[..., 3] = (b - a) * gg * z
    return p, J


def at_bound(theta, x):
    """Which internal parameters of logistic fits (..., 4) lie at a bound of their box."""
    lo, hi = logistic_bounds(x)
    return (theta <= lo + 1e-6) | (theta >= hi - 1e-6)


def effective_params(theta, x):
    """Parameters of logistic fits (B, 4) not at a bound of their box: (B,) ints.

    A parameter at a bound is not really estimated (a floor at 0, a slope at the
    step limit where the midpoint is only located within a gap), so it does not
    use up a degree of freedom of the Pearson statistic.
    """
    return 4 - at_bound(np.atleast_2d(theta), x).sum(-1)


class LogisticModel(CurveModel):
    """Four-parameter logistic (floor, ceiling, log10 t50, slope per decade)."""

    name = "logistic"
    param_names = ("floor", "ceiling", "log10_t50", "slope")

    def __init__(self, n_refine: int = 3, max_iter: int = 200):
        self.n_refine = n_refine
        self.max_iter = max_iter

    def mean(self, theta, x, ref=None):
        return logistic_mean(np.atleast_2d(theta), np.asarray(x, float))

    def natural(self, theta, x):
        theta = np.atleast_2d(theta)
        return np.column_stack([expit(theta[:, 0]), expit(theta[:, 1]), theta[:, 2], np.exp(theta[:, 3])])

    def information(self, theta, x, n):
        p, J = logistic_mean_jac(theta[None, :], x)
        return fisher_information(p[0], J[0], n)

    def _at_bound(self, theta, x):
        return at_bound(theta, x)

    def starts(self, x, k, n):
        """Candidate starts (B, S, 4) for replicate curves k (B, m)."""
        x = np.asarray(x, float)
        k, n = batch_counts(k, n)
        lo, hi = logistic_bounds(x)
        span = max(float(x.max() - x.min()), 0.1)
        ck, cn = np.cumsum(k, -1), np.cumsum(n, -1)
        left = ck[:, :-1] / cn[:, :-1]
        right = (ck[:, -1:] - ck[:, :-1]) / (cn[:, -1:] - cn[:, :-1])
        mids = (x[:-1] + x[1:]) / 2
        B, G = left.shape
        f = k / np.where(n > 0, n, 1)
        fmin, fmax = f.min(-1, keepdims=True), f.max(-1, keepdims=True)
        rising = right >= left
        ext_lo = np.where(rising, fmin, fmax)
        ext_hi = np.where(rising, fmax, fmin)

        def pack(a, b, s):
            th = np.empty((B, G, 4))
            th[..., 0] = logit(a)
            th[..., 1] = logit(b)
            th[..., 2] = mids[None, :]
            th[..., 3] = np.log(s)
            return th

        s_steep = np.exp(hi[3])
        s_mid = 2 * LN9 / (span / 2)
        s_gentle = 2 * LN9 / span
        cand = np.concatenate(
            [pack(left, right, s_steep), pack(left, right, s_mid), pack(ext_lo, ext_hi, s_gentle)], axis=1
        )
        return np.clip(cand, lo, hi)

    def fit_batch(self, x, k, n, init=None, n_refine=None) -> BatchFit:
        """Fit B replicate curves ``k`` (B, m) at once; ``init`` (q,) or (B, q) is an extra start."""
        x = np.asarray(x, float)
        k, n = batch_counts(k, n)
        B, m = k.shape
        lo, hi = logistic_bounds(x)
        R = self.n_refine if n_refine is None else n_refine
        const = log_binom_coef(k, n).sum(-1)
        if m < 2:
            th = np.tile(np.array([logit(k.sum() / max(n.sum(), 1)), logit(k.sum() / max(n.sum(), 1)), x[0], lo[3]]), (B, 1))
            return BatchFit(th, binomial_loglik(k, n, self.mean(th, x)))
        cand = self.starts(x, k, n)  # (B, S, 4)
        S = cand.shape[1]
        p0 = logistic_mean(cand.reshape(-1, 4), x).reshape(B, S, m)
        ll0 = binomial_loglik(k[:, None, :], n[:, None, :], p0, const=0.0)
        R = min(R, S)
        top = np.argsort(-ll0, axis=1)[:, :R]
        # ... and the best start of each kind (steep, moderate, gentle): with many revisions the
        # steep step starts fill the top R, and from the step limit a gradual rise is not reached
        G = S // 3
        per_kind = np.stack([k * G + np.argmax(ll0[:, k * G:(k + 1) * G], axis=1) for k in range(3)], axis=1)
        top = np.concatenate([top, per_kind], axis=1)
        chosen = np.take_along_axis(cand, top[..., None], axis=1)  # (B, R + 3, 4)
        if init is not None:
            init = np.broadcast_to(np.clip(np.asarray(init, float), lo, hi), (B, 4))
            chosen = np.concatenate([chosen, init[:, None, :]], axis=1)
        Rt = chosen.shape[1]
        # a start chosen twice (the best start is also the best of its kind) is refined once, where first chosen
        T = top.shape[1]
        earlier = np.tril(np.ones((T, T), bool), -1)  # [j, i]: i before j
        unique = np.ones((B, Rt), bool)
        unique[:, :T] = ~((top[:, :, None] == top[:, None, :]) & earlier).any(-1)
        rows = np.repeat(np.arange(B), Rt).reshape(B, Rt)[unique]
        th, ll_u = levenberg_marquardt(
            lambda t: logistic_mean_jac(t, x), chosen[unique], lo, hi, k[rows], n[rows], max_iter=self.max_iter,
        )
        theta = np.zeros((B, Rt, 4))
        ll = np.full((B, Rt), -np.inf)
        theta[unique], ll[unique] = th, ll_u
        best = np.argmax(ll, axis=1)
        return BatchFit(theta[np.arange(B), best], ll[np.arange(B), best] + const)
