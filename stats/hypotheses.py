"""Hypothesis tests of the suite, each with its null stated.

- :func:`step_vs_logistic` - H0: the curve is a single step between two adjacent
  revisions (sharp). Statistic ``T = LR / phi~`` with ``LR = 2 (l_logistic -
  l_step) >= 0`` (the logistic's closure contains every step) and
  ``phi~ = max(1, X2 / df)`` the logistic's Pearson dispersion (studentisation: it
  carries the uncertainty of the dispersion into the reference distribution). A
  step is a boundary case of the logistic (slope -> infinity), so chi-square does
  not apply: the p-value is a parametric bootstrap under the fitted step (binomial
  when ``phi~ = 1``, else beta-binomial with dispersion ``phi~``; the analysis
  passes ``phi~`` without the significance threshold, which simulation showed to
  hold the size best), refitting both models and ``phi~*`` to each replicate,
  ``p = (1 + #{T* >= T}) / (B + 1)``. Small p:
  evidence that the change is spread over revisions (gradual).
- :func:`separation_test` - H0: ``t_late / t_early <= 1`` (the late transition does
  not come after the early one), one-sided. Bootstrap p-value from the paired
  replicates of the two curves' parametric bootstraps:
  ``p = (1 + #{log ratio* <= 0}) / (B + 1)``. At the boundary ratio = 1 it rejects
  at the nominal rate (checked by simulation); inside H0 it is conservative.
- :func:`layer_floor_test` - H0: the rate of flagged heads in the floor layers is
  ``>= rate0``. Exact binomial: ``p = P(X <= k | N, rate0)``; with it the exact
  (Clopper-Pearson) one-sided upper bound ``u`` solving ``P(X <= k | N, u) = alpha``
  (``1 - alpha^(1/N)`` when ``k = 0``).
- :func:`sign_test` - H0: a head's PR is as likely to be elevated after as before it
  crosses the induction threshold (median lead ratio 1); ties dropped;
  ``p = P(X >= n_pos | n_pos + n_neg, 1/2)``, one-sided (H1: PR leads). Exact, so its
  size never exceeds alpha (discreteness can make it smaller).
- :func:`permutation_spearman` - H0: the values of ``y`` are exchangeable with
  respect to ``x`` (no association); one-sided Monte-Carlo permutation p-value of
  Spearman's rho, ``p = (1 + #{rho* >= rho}) / (R + 1)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np
from scipy import stats as sps

from stats.bootstrap import simulate_counts
from stats.models import LogisticModel, StepModel
from stats.models.base import pearson_chi2
from stats.models.logistic import effective_params, logistic_mean
from stats.results import Results, record


@dataclass
class TestResult(Results):
    """A test's statistic, p-value and stated null."""

    __test__ = False  # not a pytest test class
    name: str
    null: str
    statistic: float
    p_value: float
    n_boot: Optional[int] = None
    details: dict = field(default_factory=dict)

    def rejects(self, alpha: float = 0.05) -> bool:
        return bool(self.p_value <= alpha)

    def to_dict(self):
        """The record, ``n_boot`` left out when None and the ``details`` merged in."""
        out = record(self)
        details = out.pop("details")
        if out["n_boot"] is None:
            del out["n_boot"]
        return out | details

    def summary(self) -> str:
        return f"{self.name}: statistic {self.statistic:.4g}, p = {self.p_value:.4g} (H0: {self.null})"


def exceedance_p(t_star, t: float, n: int, tol: float = 1e-12) -> float:
    """The p-value of a permutation or bootstrap test from ``n`` replicates ``t_star`` of the statistic
    ``t`` (larger is more extreme): ``(1 + #{T* >= T}) / (n + 1)``, ``T*`` within ``tol`` of ``T``
    counting as equal (the observed order is one of the replicates: exact in size)."""
    return float((1.0 + np.sum(t_star >= t - tol)) / (n + 1.0))


def _studentiser(k, n, theta, x):
    """phi~ = max(1, X2 / df) of logistic fits (B, 4) to counts (B, m)."""
    p = logistic_mean(np.atleast_2d(theta), x)
    df = np.maximum(k.shape[-1] - effective_params(theta, x), 1)
    return np.maximum(1.0, pearson_chi2(k, n, p) / df)


def step_vs_logistic(tokens, k, n, n_boot: int, rng: np.random.Generator, dispersion: float = 1.0, fits=None,
                     studentize: bool = True) -> TestResult:
    """Parametric-bootstrap likelihood-ratio test of H0 step against the logistic (module docstring),
    up to ``n_boot`` replicates drawn sequentially (:func:`sequential_p`; ``n_boot``: those drawn)."""
    tokens, k, n = (np.asarray(a, float) for a in (tokens, k, n))
    x = np.log10(tokens)
    step_model, logistic_model = StepModel(), LogisticModel()
    if fits is None:
        fits = {"step": step_model.fit(tokens, k, n, dispersion), "logistic": logistic_model.fit(tokens, k, n, dispersion)}
    step, logistic = fits["step"], fits["logistic"]
    lr = max(2.0 * (logistic.loglik - step.loglik), 0.0)
    scale = float(_studentiser(k[None, :], n, logistic.theta[None, :], x)[0]) if studentize else 1.0
    t = lr / scale

    def replicates(size: int) -> np.ndarray:
        counts = simulate_counts(step.fitted, n, size, rng, dispersion)
        ll_step = step_model.fit_batch(x, counts, n).loglik
        bl = logistic_model.fit_batch(x, counts, n)
        lr_star = np.maximum(2.0 * (bl.loglik - ll_step), 0.0)
        return lr_star / (_studentiser(counts, n, bl.theta, x) if studentize else 1.0)

    p, used = sequential_p(replicates, t, n_boot, tol=1e-9, growth=STEP_TEST_GROWTH)
    return TestResult("step_vs_logistic", "the curve is a single step between adjacent revisions", float(t), p, used,
                      {"likelihood_ratio": float(lr), "studentiser": scale, "dispersion": float(dispersion)})


#: The step test's chunks of replicates double (:func:`sequential_p` ``growth``).
STEP_TEST_GROWTH = 2.0
#: Sequential Monte Carlo p-values stop once this many replicates reach the observed statistic.
SEQUENTIAL_HITS = 20
#: ... drawing this many replicates at a time.
SEQUENTIAL_CHUNK = 100


def sequential_p(replicates, t: float, n_max: int, tol: float = 1e-12, hits: int = SEQUENTIAL_HITS,
                 chunk: int = SEQUENTIAL_CHUNK, growth: float = 1.0) -> tuple:
    """Besag and Clifford's (1991) sequential Monte Carlo p-value of statistic ``t`` (larger is more
    extreme): replicates from ``replicates(size)``, ``chunk`` at a time, until ``hits`` of the first
    ``L`` reach ``t`` (within ``tol``): ``p = hits / L``; else after ``n_max`` ``p = (1 + #{T* >= T})
    / (n_max + 1)``. Both are valid p-values; a statistic far inside its null stops after a few
    dozen replicates. With ``growth`` > 1 each chunk grows by that factor: the same p-value (the
    stop is found inside the chunk) in fewer, larger batches. Returns ``(p, replicates drawn)``."""
    seen = reached = 0
    while seen < n_max:
        size = min(chunk, n_max - seen)
        chunk = int(chunk * growth)
        hit = np.asarray(replicates(size)) >= t - tol
        if reached + hit.sum() >= hits:
            return float(hits / (seen + int(np.flatnonzero(np.cumsum(hit) + reached >= hits)[0]) + 1)), seen + size
        reached += int(hit.sum())
        seen += size
    return float((1.0 + reached) / (n_max + 1.0)), n_max


def separation_test(log_ratio_draws) -> TestResult:
    """One-sided bootstrap test of H0 ``ratio <= 1`` from draws of log10 ratio."""
    d = np.asarray(log_ratio_draws, float)
    d = d[np.isfinite(d)]
    B = d.size
    p = (1.0 + np.sum(d <= 0)) / (B + 1.0)
    return TestResult("separation", "t_late / t_early <= 1", float(np.median(d)) if B else float("nan"), float(p), B)


def clopper_pearson_upper(k: int, N: int, alpha: float = 0.05) -> float:
    """Exact one-sided upper ``1 - alpha`` bound on a binomial rate with k of N."""
    if N <= 0 or k >= N:
        return 1.0
    return float(sps.beta.ppf(1 - alpha, k + 1, N - k))


def layer_floor_test(k: int, N: int, rate0: float = 0.05, alpha: float = 0.05) -> TestResult:
    """Exact binomial test of H0 ``rate >= rate0`` with the one-sided upper bound."""
    p = float(sps.binom.cdf(k, N, rate0)) if N > 0 else 1.0
    return TestResult("layer_floor", f"rate of flagged heads in the floor layers >= {rate0}", float(k), p, None,
                      {"k": int(k), "N": int(N), "upper_bound": clopper_pearson_upper(k, N, alpha), "level": 1 - alpha})


def sign_test(n_pos: int, n_neg: int) -> TestResult:
    """Exact one-sided sign test (H1: more positives than negatives); ties already dropped."""
    m = n_pos + n_neg
    p = float(sps.binom.sf(n_pos - 1, m, 0.5)) if m > 0 else 1.0
    return TestResult("sign", "median lead ratio = 1 (PR elevation as likely after as before the crossing)", float(n_pos), p, None,
                      {"n_pos": int(n_pos), "n_neg": int(n_neg)})


def permutation_spearman(x, y, n_perm: int, rng: np.random.Generator) -> TestResult:
    """One-sided permutation test of Spearman's rho > 0 (ranks with ties averaged)."""
    x = sps.rankdata(np.asarray(x, float))
    y = sps.rankdata(np.asarray(y, float))
    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return TestResult("spearman_permutation", "no association", float("nan"), 1.0, n_perm)

    def rho(a, b):
        a = a - a.mean(-1, keepdims=True)
        b = b - b.mean(-1, keepdims=True)
        return (a * b).sum(-1) / np.sqrt((a**2).sum(-1) * (b**2).sum(-1))

    r = float(rho(x, y))
    perms = rng.permuted(np.tile(y, (n_perm, 1)), axis=1)
    r_star = rho(x[None, :], perms)
    p = exceedance_p(r_star, r, n_perm)
    return TestResult("spearman_permutation", "no association (exchangeable)", r, p, n_perm)
