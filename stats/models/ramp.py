"""Linear ramp in log10 tokens across the observed range.

    p(x) = start + (end - start) * u(x),   u = (x - x_first) / (x_last - x_first),

``start`` the level at the first revision and ``end`` at the last (u clipped to
[0, 1] outside the observed range, where the ramp is flat). Both levels lie in
[0, 1], so every p does; the likelihood is concave in (start, end). K = 2. This is
the "steady change, no transition" alternative: a logistic that beats it has a
localised transition; a ramp that ties it says the change is spread over the range.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit

from stats.models.base import (
    LOGIT_BOUND,
    BatchFit,
    CurveModel,
    batch_counts,
    fisher_information,
    levenberg_marquardt,
    log_binom_coef,
    logit,
)


def _u(x, ref):
    x = np.asarray(x, float)
    ref = np.asarray(ref, float)
    span = ref.max() - ref.min()
    if span <= 0:
        return np.full_like(x, 0.5)
    return np.clip((x - ref.min()) / span, 0.0, 1.0)


def ramp_mean_jac(theta, u):
    a = expit(theta[:, 0])[:, None]
    b = expit(theta[:, 1])[:, None]
    p = a * (1 - u[None, :]) + b * u[None, :]
    J = np.empty(p.shape + (2,))
    J[..., 0] = a * (1 - a) * (1 - u[None, :])
    J[..., 1] = b * (1 - b) * u[None, :]
    return p, J


class RampModel(CurveModel):
    """Linear in log10 tokens from ``start`` (first revision) to ``end`` (last)."""

    name = "ramp"
    param_names = ("start", "end")

    def mean(self, theta, x, ref=None):
        ref = x if ref is None else ref
        return ramp_mean_jac(np.atleast_2d(theta), _u(x, ref))[0]

    def information(self, theta, x, n):
        p, J = ramp_mean_jac(theta[None, :], _u(x, x))
        return fisher_information(p[0], J[0], n)

    def fit_batch(self, x, k, n, init=None) -> BatchFit:
        k, n = batch_counts(k, n)
        B = k.shape[0]
        u = _u(x, x)
        f = k / np.where(n > 0, n, 1)
        const = log_binom_coef(k, n).sum(-1)
        # starts: end points; weighted least-squares line; the pooled constant
        X = np.column_stack([1 - u, u])
        XtW = X.T[None, :, :] * n[:, None, :]
        coef = np.linalg.solve(XtW @ X[None, :, :] + 1e-9 * np.eye(2), (XtW @ f[..., None]))[..., 0]
        pooled = (k.sum(-1) / np.maximum(n.sum(-1), 1))[:, None]
        starts = np.stack(
            [np.column_stack([f[:, 0], f[:, -1]]), np.clip(coef, 0, 1), np.repeat(pooled, 2, axis=1)], axis=1
        )
        S = starts.shape[1]
        theta, ll = levenberg_marquardt(lambda t: ramp_mean_jac(t, u), logit(starts.reshape(-1, 2)),
                                        np.full(2, -LOGIT_BOUND), np.full(2, LOGIT_BOUND),
                                        np.repeat(k, S, 0), np.repeat(n, S, 0))
        theta, ll = theta.reshape(B, S, 2), ll.reshape(B, S)
        best = np.argmax(ll, 1)
        r = np.arange(B)
        return BatchFit(theta[r, best], ll[r, best] + const)
