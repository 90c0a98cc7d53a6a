"""Curve models for k(t) of n heads flagged: logistic, step, ramp, constant.

Each has ``fit(tokens, k, n, dispersion=1)`` returning a
:class:`~stats.models.base.FitResults` (``params``, ``conf_int()``, ``aicc``,
``loglik``, ``predict(tokens)``, ``summary()``) and ``fit_batch(x, k, n)`` that fits
many replicate curves at once (the bootstrap). :func:`fit_all` fits the four with
one shared dispersion, estimated on the logistic (the most flexible).
"""

from __future__ import annotations

from stats.config import DEFAULTS
from stats.models.base import (
    CurveModel,
    Dispersion,
    FitResults,
    binomial_loglik,
    estimate_dispersion,
    information_criterion,
)
from stats.models.constant import ConstantModel
from stats.models.logistic import LogisticModel, effective_params
from stats.models.ramp import RampModel
from stats.models.step import StepModel

#: The models compared for every curve, most flexible first.
MODELS = {"logistic": LogisticModel, "step": StepModel, "ramp": RampModel, "constant": ConstantModel}


def fit_all(tokens, k, n, overdispersion: bool = DEFAULTS.fit.overdispersion,
            level: float = DEFAULTS.fit.dispersion_level):
    """Fit the four models to one curve; return ``(fits, dispersion)``. The logistic's dispersion
    (:mod:`stats.models.base`, ``K_eff``: :func:`~stats.models.logistic.effective_params`) is applied,
    with ``overdispersion`` on and overdispersion present, to every model (standard errors, QAICc)."""
    fits = {name: model().fit(tokens, k, n) for name, model in MODELS.items()}
    logistic = fits["logistic"]
    k_eff = int(effective_params(logistic.theta, logistic.x)[0])
    disp = estimate_dispersion(k, n, logistic.fitted, k_eff, level)
    if not overdispersion:
        disp = Dispersion(disp.chi2, disp.df, 1.0, False, disp.p_value)
    if disp.phi > 1.0:
        fits = {name: fit.with_dispersion(disp.phi) for name, fit in fits.items()}
    return fits, disp


__all__ = ["CurveModel", "FitResults", "Dispersion", "LogisticModel", "StepModel", "RampModel", "ConstantModel",
           "MODELS", "fit_all", "binomial_loglik", "estimate_dispersion", "information_criterion"]
