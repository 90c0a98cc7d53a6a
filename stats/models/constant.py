"""Constant: no change at all, ``p_i = p`` with ``p = sum k / sum n`` (closed form). K = 1."""

from __future__ import annotations

import numpy as np
from scipy.special import expit

from stats.models.base import BatchFit, CurveModel, batch_counts, binomial_loglik, logit


class ConstantModel(CurveModel):
    """One level for every revision."""

    name = "constant"
    param_names = ("p",)

    def mean(self, theta, x, ref=None):
        theta = np.atleast_2d(theta)
        return np.broadcast_to(expit(theta[:, :1]), (theta.shape[0], np.size(x))).copy()

    def information(self, theta, x, n):
        p = expit(theta[0])
        return np.array([[np.asarray(n, float).sum() * p * (1 - p)]])

    def fit_batch(self, x, k, n, init=None) -> BatchFit:
        k, n = batch_counts(k, n)
        p = k.sum(-1) / np.maximum(n.sum(-1), 1)
        return BatchFit(logit(p)[:, None], binomial_loglik(k, n, p[:, None]))
