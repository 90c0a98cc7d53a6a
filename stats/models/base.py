"""Common base of the curve models: binomial likelihood on log10 tokens.

A curve is ``k_i`` of ``n_i`` heads flagged at revisions ``i = 1..m`` with token
counts ``t_i``; the models work on ``x_i = log10 t_i``. A model gives the flagged
probability ``p(x; theta)`` and is fitted by binomial maximum likelihood::

    l(theta) = sum_i [ log C(n_i, k_i) + k_i log p_i + (n_i - k_i) log(1 - p_i) ].

Overdispersion (quasi-likelihood, McCullagh & Nelder 1989): the Pearson statistic
``X2 = sum_i (k_i - n_i p_i)^2 / (n_i p_i (1 - p_i))`` of the most flexible model
(the logistic) on ``df = m - K_eff`` degrees of freedom (``K_eff``: its parameters
not at a bound of their box) estimates the dispersion. Overdispersion is *present* when
``X2`` exceeds the 0.95 quantile of chi-square(df); then ``phi = X2 / df``, otherwise
``phi = 1``. Where present, standard errors are scaled by ``sqrt(phi)``, model comparison
uses QAICc and the parametric bootstrap draws beta-binomial counts of variance
``phi n p (1 - p)`` (:mod:`stats.bootstrap`).

Model comparison by AICc (m is about 10, so the small-sample correction matters)::

    AICc  = -2 l + 2 K + 2 K (K + 1) / (m - K - 1)
    QAICc = -2 l / phi + 2 K' + 2 K' (K' + 1) / (m - K' - 1),  K' = K + 1 (phi estimated)

and ``+inf`` when ``m - K - 1 <= 0`` (too few revisions for that model).

Every model fits many replicates at once (``fit_batch``): the parametric bootstrap
refits thousands of replicate curves in one vectorised call. Smooth models use a
batched, box-constrained Levenberg-Marquardt (Fisher scoring) from several starts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np
import pandas as pd
from scipy import stats as sps
from scipy.special import expit, gammaln

from stats.bootstrap import parametric_bootstrap
from stats.results import Results

#: Probabilities are kept in [EPS, 1 - EPS] inside logarithms.
EPS = 1e-12
#: Bound on the logit of a probability parameter (expit(-18) ~ 1.5e-8).
LOGIT_BOUND = 18.0


def batch_counts(k, n) -> tuple:
    """Counts ``k`` as rows (B, m) and ``n`` broadcast to them, as floats (also fractions and their weights)."""
    k = np.atleast_2d(np.asarray(k, float))
    return k, np.broadcast_to(np.asarray(n, float), k.shape)


def fisher_information(p, J, n):
    """Expected information ``J' diag(n / (p (1 - p))) J`` of one curve, ``J = dp/dtheta`` (m, q)."""
    p = np.clip(p, EPS, 1 - EPS)
    return J.T @ (J * (np.asarray(n, float) / (p * (1 - p)))[:, None])


def log_binom_coef(k, n):
    """log C(n, k), elementwise."""
    k = np.asarray(k, float)
    n = np.asarray(n, float)
    return gammaln(n + 1) - gammaln(k + 1) - gammaln(n - k + 1)


def binomial_loglik(k, n, p, const=None):
    """Binomial log-likelihood summed over the last axis (broadcasting k, n, p)."""
    p = np.clip(p, EPS, 1 - EPS)
    ll = (k * np.log(p) + (n - k) * np.log1p(-p)).sum(-1)
    if const is None:
        const = log_binom_coef(k, n).sum(-1)
    return ll + const


def pearson_chi2(k, n, p):
    """Pearson X2 = sum (k - n p)^2 / (n p (1 - p)) over the last axis."""
    p = np.clip(p, EPS, 1 - EPS)
    return ((k - n * p) ** 2 / (n * p * (1 - p))).sum(-1)


def information_criterion(loglik, n_params, n_obs, dispersion=1.0):
    """AICc (``dispersion == 1``) or QAICc (``dispersion > 1``, one extra parameter); ``inf`` when
    the sample is too small for the correction term."""
    if dispersion > 1.0:
        kk = n_params + 1
        dev = -2.0 * loglik / dispersion
    else:
        kk = n_params
        dev = -2.0 * loglik
    denom = n_obs - kk - 1
    if denom <= 0:
        return float("inf")
    return float(dev + 2 * kk + 2 * kk * (kk + 1) / denom)


@dataclass
class Dispersion(Results):
    """Pearson dispersion estimate of a fit (see module docstring)."""

    RENAME = {"chi2": "pearson_chi2"}

    chi2: float
    df: int
    phi: float
    #: max(1, X2 / df) without the significance threshold (the bootstrap test's)
    phi_raw: float = field(init=False)
    present: bool
    p_value: float

    def __post_init__(self):
        self.phi_raw = 1.0 if self.df < 1 or not np.isfinite(self.chi2) else max(1.0, self.chi2 / self.df)

    def draw(self, n_boot: int, rng) -> np.ndarray:
        """One phi a bootstrap replicate: ``max(1, X2 / chi2_b)``, ``chi2_b ~ chi-square(df)``,
        when ``X2 / df > 1`` (the estimate's uncertainty), else ones."""
        if self.phi_raw <= 1.0:
            return np.ones(n_boot)
        return np.maximum(1.0, self.chi2 / rng.chisquare(self.df, size=n_boot))



def estimate_dispersion(k, n, p, n_params, level=0.95) -> Dispersion:
    """Quasi-likelihood dispersion: ``phi = X2/df`` if ``X2 > chi2_{level}(df)``, else 1."""
    chi2 = float(pearson_chi2(np.asarray(k, float), np.asarray(n, float), np.asarray(p, float)))
    df = int(len(np.atleast_1d(k)) - n_params)
    if df < 1 or not np.isfinite(chi2):
        return Dispersion(chi2, df, 1.0, False, float("nan"))
    pval = float(sps.chi2.sf(chi2, df))
    present = chi2 > sps.chi2.ppf(level, df)
    return Dispersion(chi2, df, chi2 / df if present else 1.0, bool(present), pval)


def levenberg_marquardt(mean_jac: Callable[[np.ndarray], tuple], theta0: np.ndarray, lower: np.ndarray,
                        upper: np.ndarray, k: np.ndarray, n: np.ndarray, max_iter: int = 200, tol: float = 1e-10):
    """Maximise the binomial log-likelihood of P problems at once.

    Fisher scoring with Levenberg damping: with ``J = dp/dtheta`` (P, m, q),
    score ``g = J' (k - n p) / (p (1 - p))`` and expected information
    ``H = J' diag(n / (p (1 - p))) J``, the step solves
    ``(H + lambda (diag H + 1e-8)) delta = g``; a step is kept if it does not lower
    the likelihood (then ``lambda /= 3``), else ``lambda *= 10``. Box constraints
    are handled by projection, with coordinates at a bound whose score points
    outwards frozen for that iteration (active set). A problem stops when a kept
    step gains less than ``tol`` or ``lambda`` exceeds 1e10; its rows are then dropped, so an
    iteration costs what the problems still running need.

    ``mean_jac(theta)`` maps (P', q) parameters to ``p`` (P', m) and ``J`` (P', m, q); ``k`` is
    (P, m), ``n`` (m,) or (P, m). Returns ``theta`` (P, q) and the log-likelihood without the
    binomial-coefficient constant (P,).
    """
    theta = np.clip(np.array(theta0, float), lower, upper)
    P = theta.shape[0]
    k = np.asarray(k, float)
    n = np.broadcast_to(np.asarray(n, float), k.shape)
    ll_out = np.empty(P)
    ids = np.arange(P)
    th, kk, nn = theta.copy(), k, n
    p, J = mean_jac(th)
    ll = binomial_loglik(kk, nn, p, const=0.0)
    lam = np.full(P, 1e-3)
    at_lower, at_upper = lower + 1e-12, upper - 1e-12
    for _ in range(max_iter):
        if ids.size == 0:
            break
        new = np.clip(th + _damped_step(th, p, J, kk, nn, lam, at_lower, at_upper), lower, upper)
        pn, Jn = mean_jac(new)
        lln = binomial_loglik(kk, nn, pn, const=0.0)
        gain = lln - ll
        keep = np.isfinite(lln) & (gain >= -1e-13)
        if keep.all():
            th, p, J, ll = new, pn, Jn, lln
            lam = np.maximum(lam / 3.0, 1e-12)
        else:
            th[keep], p[keep], J[keep], ll[keep] = new[keep], pn[keep], Jn[keep], lln[keep]
            lam = np.where(keep, np.maximum(lam / 3.0, 1e-12), lam * 10.0)
        done = np.where(keep, np.abs(gain) < tol, lam > 1e10)
        if done.any():
            theta[ids[done]], ll_out[ids[done]] = th[done], ll[done]
            run = ~done
            ids, th, p, J, ll, lam, kk, nn = ids[run], th[run], p[run], J[run], ll[run], lam[run], kk[run], nn[run]
    theta[ids], ll_out[ids] = th, ll
    return theta, ll_out


def _damped_step(th, p, J, kk, nn, lam, at_lower, at_upper) -> np.ndarray:
    """The damped Fisher-scoring step of :func:`levenberg_marquardt` (P, q): score ``g`` and
    information ``H`` with the coordinates at a bound whose score points outwards frozen."""
    pp = np.clip(p, EPS, 1 - EPS)
    v = pp * (1 - pp)
    JT = J.transpose(0, 2, 1)  # (P, q, m): batched matrix products, faster than einsum here
    g = np.matmul(JT, ((kk - nn * pp) / v)[..., None])[..., 0]
    H = np.matmul(JT * (nn / v)[:, None, :], J)
    fixed = ((th <= at_lower) & (g < 0)) | ((th >= at_upper) & (g > 0))
    if fixed.any():
        free = ~fixed
        g = np.where(fixed, 0.0, g)
        H = H * free[:, :, None] * free[:, None, :]
    diag = np.diagonal(H, axis1=1, axis2=2)
    damp = lam[:, None] * (diag + 1e-8) + fixed
    return _solve_damped(H + damp[:, :, None] * np.eye(th.shape[1]), g)


#: From this many systems on, :func:`_solve_damped` factorises them all at once (:func:`_cholesky_solve`).
CHOLESKY_FROM = 256


def _solve_damped(A: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The steps ``A x = b`` of a batch of damped information matrices (P, q, q), (P, q), symmetric
    positive definite: many at once by a Cholesky factorisation vectorised over the batch
    (:func:`_cholesky_solve`), a few (or those it finds not positive definite) by LAPACK's batched
    solve; where LAPACK finds a system exactly singular, Gaussian elimination one system at a time
    (:func:`_solve_spd`). A non-finite solution gives no step (0)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if len(A) >= CHOLESKY_FROM:
            x = _cholesky_solve(A, b)
            bad = ~np.isfinite(x).all(-1)
            if bad.any():
                x[bad] = _lapack_solve(A[bad], b[bad])
        else:
            x = _lapack_solve(A, b)
    return np.where(np.isfinite(x), x, 0.0)


def _lapack_solve(A: np.ndarray, b: np.ndarray) -> np.ndarray:
    try:
        return np.linalg.solve(A, b[..., None])[..., 0]
    except np.linalg.LinAlgError:
        return _solve_spd(A, b)


def _cholesky_solve(A: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``A x = b`` for a batch of symmetric positive-definite (P, q, q), (P, q) by ``A = L L'``,
    each entry of ``L`` one vectorised step over the batch (the entries as contiguous (P,) rows:
    for many small systems, faster than one LAPACK call a system). Not positive definite: NaN."""
    q = A.shape[-1]
    At, bt = np.ascontiguousarray(A.transpose(1, 2, 0)), b.T
    L = [[None] * q for _ in range(q)]
    for j in range(q):
        d = At[j, j] - sum(L[j][i] * L[j][i] for i in range(j)) if j else At[j, j]
        L[j][j] = np.sqrt(d)
        for r in range(j + 1, q):
            t = At[r, j] - sum(L[r][i] * L[j][i] for i in range(j)) if j else At[r, j]
            L[r][j] = t / L[j][j]
    y = [None] * q
    for r in range(q):
        y[r] = ((bt[r] - sum(L[r][i] * y[i] for i in range(r))) if r else bt[r]) / L[r][r]
    x = [None] * q
    for r in range(q - 1, -1, -1):
        x[r] = ((y[r] - sum(L[i][r] * x[i] for i in range(r + 1, q))) if r < q - 1 else y[r]) / L[r][r]
    return np.stack(x, -1)


def _solve_spd(A: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Solve ``A x = b`` for a batch of small symmetric positive-definite systems (P, q, q), (P, q)
    by Gaussian elimination without pivoting, one column at a time over the whole batch. A singular
    system gives non-finite entries (where LAPACK's batched solve refuses the whole batch)."""
    A, b = A.copy(), b.copy()
    q = A.shape[-1]
    for j in range(q):
        f = A[:, j + 1:, j] / A[:, j, j][:, None]
        A[:, j + 1:, j:] -= f[:, :, None] * A[:, j, None, j:]
        b[:, j + 1:] -= f * b[:, j, None]
    x = np.empty_like(b)
    for j in range(q - 1, -1, -1):
        x[:, j] = (b[:, j] - (A[:, j, j + 1:] * x[:, j + 1:]).sum(-1)) / A[:, j, j]
    return x


@dataclass
class BatchFit:
    """Fits of B replicate curves: internal parameters (B, q) and log-likelihoods (B,)."""

    theta: np.ndarray
    loglik: np.ndarray


@dataclass
class FitResults:
    """One fitted curve model, in the style of a statsmodels results object: ``params`` (natural
    parameters), ``conf_int()`` (Wald on the internal scale mapped back, scaled by ``sqrt(phi)``, or
    bootstrap percentile), ``aicc`` (QAICc where ``dispersion > 1``), ``predict(tokens)``."""

    model: "CurveModel"
    theta: np.ndarray
    loglik: float
    tokens: np.ndarray
    k: np.ndarray
    n: np.ndarray
    dispersion: float = 1.0
    cov_theta: Optional[np.ndarray] = None
    notes: list = field(default_factory=list)

    @property
    def x(self):
        return np.log10(self.tokens)

    @property
    def params(self) -> pd.Series:
        return pd.Series(self.model.natural(self.theta[None, :], self.x)[0], index=self.model.param_names)

    @property
    def n_params(self) -> int:
        return self.model.n_params

    def to_dict(self) -> dict:
        """The written record of the fit: its natural parameters, log-likelihood and AICc."""
        return {"params": {k: float(v) for k, v in self.params.items()}, "loglik": self.loglik, "aicc": self.aicc}

    @property
    def n_obs(self) -> int:
        return len(self.tokens)

    @property
    def aicc(self) -> float:
        return information_criterion(self.loglik, self.n_params, self.n_obs, self.dispersion)

    @property
    def fitted(self) -> np.ndarray:
        """Fitted probabilities at the observed revisions."""
        return self.model.mean(self.theta[None, :], self.x)[0]

    def predict(self, tokens) -> np.ndarray:
        """Fitted probability at the given token counts."""
        x = np.log10(np.asarray(tokens, float))
        return self.model.mean(self.theta[None, :], x, ref=self.x)[0]

    def with_dispersion(self, phi: float) -> "FitResults":
        """The same fit under dispersion ``phi`` (covariance scaled, QAICc)."""
        cov = None if self.cov_theta is None else self.cov_theta * (phi / self.dispersion)
        return FitResults(self.model, self.theta, self.loglik, self.tokens, self.k, self.n, float(phi), cov, list(self.notes))

    def conf_int(self, alpha=0.05, method="wald", n_boot=1000, seed=0) -> pd.DataFrame:
        """Intervals for ``params``: ``wald`` (NaN for a parameter at a bound) or ``bootstrap``."""
        names = list(self.model.param_names)
        if method == "bootstrap":
            boot = parametric_bootstrap(self, n_boot, np.random.default_rng(seed))
            nat = self.model.natural(boot.theta, self.x)
            lo, hi = np.nanquantile(nat, [alpha / 2, 1 - alpha / 2], axis=0)
            return pd.DataFrame({"lower": lo, "upper": hi}, index=names)
        if method != "wald":
            raise ValueError(f"conf_int method {method!r}: valid choices are 'wald', 'bootstrap'")
        z = sps.norm.ppf(1 - alpha / 2)
        se = np.full(len(self.theta), np.nan) if self.cov_theta is None else np.sqrt(np.clip(np.diag(self.cov_theta), 0, None))
        lo_t, hi_t = self.theta - z * se, self.theta + z * se
        with np.errstate(over="ignore", invalid="ignore"):
            lo = self.model.natural(lo_t[None, :], self.x)[0]
            hi = self.model.natural(hi_t[None, :], self.x)[0]
        lo, hi = np.minimum(lo, hi), np.maximum(lo, hi)
        return pd.DataFrame({"lower": lo, "upper": hi}, index=names)

    def summary(self) -> str:
        """A plain-text table of the fit."""
        ci = self.conf_int()
        crit = "QAICc" if self.dispersion > 1 else "AICc"
        lines = [
            f"{self.model.name} model, binomial ML on log10 tokens",
            f"  revisions: {self.n_obs}   parameters: {self.n_params}   "
            f"log-likelihood: {self.loglik:.3f}   {crit}: {self.aicc:.3f}   dispersion: {self.dispersion:.3f}",
            f"  {'parameter':<12}{'estimate':>14}{'95% lower':>14}{'95% upper':>14}",
        ]
        for name, val in self.params.items():
            lines.append(f"  {name:<12}{val:>14.5g}{ci.loc[name, 'lower']:>14.5g}{ci.loc[name, 'upper']:>14.5g}")
        lines.extend(f"  note: {s}" for s in self.notes)
        return "\n".join(lines)

    def __repr__(self):
        return f"<FitResults {self.model.name}: loglik={self.loglik:.3f} aicc={self.aicc:.3f}>"


class CurveModel:
    """Base of the curve models: ``fit(tokens, k, n)`` returns a :class:`FitResults`.

    Subclasses define the internal parameters ``theta`` (unconstrained or boxed),
    ``mean(theta, x)``, ``natural(theta, x)`` and ``fit_batch(x, k, n)``.
    """

    name: str = "base"
    param_names: tuple = ()

    @property
    def n_params(self) -> int:
        return len(self.param_names)

    def mean(self, theta, x, ref=None):  # pragma: no cover - abstract
        raise NotImplementedError

    def natural(self, theta, x):
        """The natural parameters (B, q) of internal ones: here probabilities from their logits."""
        return expit(np.atleast_2d(theta))

    def fit_batch(self, x, k, n, init=None) -> BatchFit:  # pragma: no cover - abstract
        raise NotImplementedError

    def information(self, theta, x, n):  # pragma: no cover - abstract
        """Expected Fisher information of the internal parameters (q, q)."""
        raise NotImplementedError

    def fit(self, tokens, k, n, dispersion: float = 1.0) -> FitResults:
        """Fit one curve (``tokens`` > 0, ``k``, ``n``: one value a revision, sorted by tokens) by
        binomial maximum likelihood; ``dispersion`` (phi >= 1, :func:`estimate_dispersion`) scales
        standard errors and turns AICc into QAICc."""
        tokens = np.asarray(tokens, float)
        k = np.asarray(k, float)
        n = np.asarray(n, float)
        x = np.log10(tokens)
        bf = self.fit_batch(x, k[None, :], n)
        theta = bf.theta[0]
        ll = float(bf.loglik[0])
        cov = _inverse_on_free(self.information(theta, x, n), self._at_bound(theta, x)) * dispersion
        notes = ["parameters at a bound have no Wald interval (NaN)"] if np.isnan(np.diag(cov)).any() else []
        return FitResults(self, theta, ll, tokens, k, n, float(dispersion), cov, notes)

    def _at_bound(self, theta, x):
        """Which internal parameters lie at a bound of their box (no Wald interval): here logits at
        :data:`LOGIT_BOUND`."""
        return np.abs(theta) >= LOGIT_BOUND - 1e-6


def _inverse_on_free(info, at_bound):
    """Inverse of the information over the free parameters; NaN rows for bound ones."""
    q = info.shape[0]
    cov = np.full((q, q), np.nan)
    free = ~at_bound
    if free.any():
        sub = info[np.ix_(free, free)]
        try:
            inv = np.linalg.inv(sub)
            if not np.all(np.isfinite(inv)) or np.any(np.diag(inv) < 0):
                raise np.linalg.LinAlgError
        except np.linalg.LinAlgError:
            inv = np.linalg.pinv(sub)
            bad = np.diag(inv) <= 0
            inv[bad, :] = np.nan
            inv[:, bad] = np.nan
        cov[np.ix_(free, free)] = inv
    return cov


def logit(p):
    p = np.clip(np.asarray(p, float), expit(-LOGIT_BOUND), expit(LOGIT_BOUND))
    return np.log(p) - np.log1p(-p)
