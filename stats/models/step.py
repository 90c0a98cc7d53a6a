"""Single step (one change point between two adjacent revisions).

    p_i = before  for revisions i <= j,     p_i = after  for i > j,

with the split ``j`` (the last revision before the change) chosen among the m - 1
gaps. For a fixed split the maximum-likelihood levels are the pooled fractions
``before = sum_{i<=j} k_i / sum_{i<=j} n_i`` and ``after`` likewise on the right, so
the fit is exact (closed form, every split tried). The split counts as one
parameter: K = 3. Where the change lies inside the gap is not identified by the
data; ``predict`` puts it at the gap's midpoint in log10 tokens.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit

from stats.models.base import BatchFit, CurveModel, batch_counts, binomial_loglik, log_binom_coef, logit


def _level_loglik(k, n, p):
    p = np.clip(p, 1e-300, 1.0)
    q = np.clip(1 - p, 1e-300, 1.0)
    return np.where(k > 0, k * np.log(p), 0.0) + np.where(n - k > 0, (n - k) * np.log(q), 0.0)


class StepModel(CurveModel):
    """Two levels and a change between revisions ``split`` and ``split + 1``."""

    name = "step"
    param_names = ("before", "after", "log10_last_before", "log10_first_after")

    @property
    def n_params(self) -> int:
        return 3

    def mean(self, theta, x, ref=None):
        theta = np.atleast_2d(theta)
        x = np.asarray(x, float)
        ref = x if ref is None else np.asarray(ref, float)
        j = theta[:, 2].astype(int)
        cut = (ref[j] + ref[np.minimum(j + 1, len(ref) - 1)]) / 2
        left = x[None, :] <= cut[:, None]
        return np.where(left, expit(theta[:, 0])[:, None], expit(theta[:, 1])[:, None])

    def natural(self, theta, x):
        theta = np.atleast_2d(theta)
        x = np.asarray(x, float)
        ok = np.isfinite(theta[:, 2])
        j = np.where(ok, theta[:, 2], 0).astype(int)
        before = np.where(ok, x[j], np.nan)
        after = np.where(ok, x[np.minimum(j + 1, len(x) - 1)], np.nan)
        return np.column_stack([expit(theta[:, 0]), expit(theta[:, 1]), before, after])

    def information(self, theta, x, n):
        n = np.asarray(n, float)
        j = int(theta[2])
        a, b = expit(theta[0]), expit(theta[1])
        info = np.zeros((3, 3))
        info[0, 0] = n[: j + 1].sum() * a * (1 - a)
        info[1, 1] = n[j + 1 :].sum() * b * (1 - b)
        return info

    def _at_bound(self, theta, x):
        return np.array([abs(theta[0]) >= 17.9, abs(theta[1]) >= 17.9, True])

    def fit_batch(self, x, k, n, init=None) -> BatchFit:
        k, n = batch_counts(k, n)
        B, m = k.shape
        const = log_binom_coef(k, n).sum(-1)
        if m < 2:
            p = k.sum(-1) / np.maximum(n.sum(-1), 1)
            th = np.column_stack([logit(p), logit(p), np.zeros(B)])
            return BatchFit(th, binomial_loglik(k, n, p[:, None]))
        ck, cn = np.cumsum(k, -1), np.cumsum(n, -1)
        kl, nl = ck[:, :-1], cn[:, :-1]
        kr, nr = ck[:, -1:] - kl, cn[:, -1:] - nl
        a = kl / np.where(nl > 0, nl, 1)
        b = kr / np.where(nr > 0, nr, 1)
        ll = _level_loglik(kl, nl, a) + _level_loglik(kr, nr, b)  # every split's, without constants: (B, m - 1)
        j = np.argmax(ll, axis=1)
        r = np.arange(B)
        th = np.column_stack([logit(a[r, j]), logit(b[r, j]), j.astype(float)])
        return BatchFit(th, ll[r, j] + const)
