"""Parametric bootstrap of a fitted curve (never resampling revisions).

Replicates draw new counts at the same revisions from the fitted probabilities:
``k*_i ~ Binomial(n_i, p_hat_i)`` when the dispersion is 1, and where
overdispersion is present (phi > 1) a beta-binomial with the same mean and
variance ``phi n_i p_i (1 - p_i)``::

    pi_i ~ Beta(p_i (1 - rho_i) / rho_i, (1 - p_i) (1 - rho_i) / rho_i),
    k*_i ~ Binomial(n_i, pi_i),      rho_i = (phi - 1) / (n_i - 1).

The analysis draws each replicate's phi, ``phi_b = max(1, X2 / chi2_b)``, ``chi2_b ~
chi-square(df)`` where ``X2 / df > 1`` (:meth:`stats.models.base.Dispersion.draw`): with about
six degrees of freedom a plug-in phi under-covers (simulation at phi = 4: 95 % intervals
covered 86 %; with the draws, 94 %). Replicates are refitted all at once (``fit_batch``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def simulate_counts(p, n, n_boot: int, rng: np.random.Generator, dispersion=1.0) -> np.ndarray:
    """Draw ``n_boot`` replicate count vectors (n_boot, m) around probabilities ``p``; ``dispersion``:
    one phi or one a replicate (phi <= 1: binomial, else beta-binomial)."""
    p = np.clip(np.asarray(p, float), 0.0, 1.0)
    n = np.asarray(n, int)
    size = (n_boot, p.size)
    phi = np.broadcast_to(np.asarray(dispersion, float), (n_boot,))
    pi = np.broadcast_to(p, size).copy()
    over = phi > 1.0
    if over.any():
        rho = np.clip((phi[over, None] - 1.0) / np.maximum(n[None, :] - 1, 1), 1e-9, 1 - 1e-9)
        scale = (1 - rho) / rho
        alpha = np.maximum(p[None, :] * scale, 1e-9)
        beta = np.maximum((1 - p[None, :]) * scale, 1e-9)
        draw = rng.beta(alpha, beta)
        pi[over] = np.where(p[None, :] <= 0, 0.0, np.where(p[None, :] >= 1, 1.0, draw))
    return rng.binomial(np.broadcast_to(n, size), pi)


@dataclass
class BootstrapResults:
    """Refitted replicates: internal parameters (B, q), log-likelihoods and counts."""

    theta: np.ndarray
    loglik: np.ndarray
    counts: np.ndarray


def parametric_bootstrap(fit, n_boot: int, rng: np.random.Generator, model=None, dispersion=None) -> BootstrapResults:
    """Bootstrap a :class:`~stats.models.base.FitResults`: simulate from its fit, refit with
    ``model`` (default: its own), under ``dispersion`` (default: the fit's phi; or one a replicate)."""
    model = fit.model if model is None else model
    dispersion = fit.dispersion if dispersion is None else dispersion
    counts = simulate_counts(fit.fitted, fit.n, n_boot, rng, dispersion)
    init = fit.theta if model is fit.model else None
    bf = model.fit_batch(fit.x, counts, fit.n, init=init)
    return BootstrapResults(bf.theta, bf.loglik, counts)
