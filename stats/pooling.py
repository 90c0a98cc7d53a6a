"""Pooling across training runs: many seeds of one model, with their between-run variation.

Every verdict, time and gap of :mod:`stats.analysis` is *within* one training run (its
intervals bootstrap over heads and revisions). A seed suite (several runs of one model
that differ only in their seeds: PolyPythias, or the toy recipes' ``seed``; the curves'
:attr:`stats.tracked.TrackedResults.seeds`) says how much another run would differ. Per
group of runs this module reports each run's t50s, shapes and gap ratio with its interval,
and pools the log gap ratio by a random-effects meta-analysis.

Model (log10 scale). Run i gives an estimate ``y_i`` of its log10 gap ratio ``theta_i``
(:mod:`stats.times`: log10 t50(late) - log10 t(early)) with within-run variance ``v_i``,
the variance of its bootstrap draws (paired replicates of the two curves' parametric
bootstraps). Between runs ``theta_i ~ N(mu, tau^2)``, ``y_i | theta_i ~ N(theta_i, v_i)``:
``10^mu`` is the pooled ratio, ``tau^2`` the between-run variance (decades^2).

No censored run (:func:`hartung_knapp`): ``tau^2`` by Paule-Mandel (statsmodels'
``combine_effects``, ``analysis.pooling.tau2_method``), ``w_i = 1 / (v_i + tau^2)``,
``mu = sum w_i y_i / sum w_i``; interval by Hartung-Knapp (Sidik-Jonkman),
``mu +- t_{k-1} se``, ``se^2 = max(1, q) / sum w_i``, ``q = sum w_i (y_i - mu)^2 / (k - 1)``:
the t quantile keeps the interval honest with few runs, and the scale truncated at 1
(Knapp & Hartung 2003; Roever, Knapp & Friede 2015) keeps runs that happen to look alike
from shrinking it below the fixed-effect t interval. Test of separation: one-sided, H0
``mu <= 0`` (pooled ratio <= 1), ``p = 1 - T_{k-1}(mu / se)``. ``I^2 = max(0, 1 -
(k - 1) / Q)`` with Cochran's Q; ``tau^2`` interval by Q-profile (Viechtbauer 2007);
prediction interval for a new run (Higgins, Thompson & Spiegelhalter 2009),
``mu +- t_{k-2} sqrt(tau^2 + se^2)`` (needs k >= 3).

Censored runs enter as bounds, not points (:func:`censored_likelihood`). A run whose gap
is a one-sided bound (:class:`stats.times.GapRatio` ``bound``) says ``y_i* >= b_i``
(``lower``) or ``<= b_i`` (``upper``), ``y_i*`` the estimate with its censored transition
inside the range, ``b_i`` the free side's estimate against the bounding revision and ``v_i``
its variance. The random-effects likelihood is then interval-censored (Tobit):

    L(mu, tau) = prod_points phi((y_i - mu) / s_i) / s_i
                 x prod_lower Phi((mu - b_i) / s_i) x prod_upper Phi((b_i - mu) / s_i),
    s_i^2 = v_i + tau^2,

maximised in (mu, tau). The interval for ``mu`` is the likelihood one at ``tau_hat`` with
Hartung-Knapp's calibration, ``{mu0: 2 (l_max - l(mu0, tau_hat)) <= max(1, q) t_{df, 1-a/2}^2}``,
``q = sum_points w_i (y_i - mu_hat)^2 / df`` over the runs seen as points (``w_i = 1 / s_i^2``;
q = 1 with fewer than two points): without bounds the likelihood is quadratic in ``mu`` and
this is exactly the Hartung-Knapp interval (with the ML ``tau^2``); with bounds it follows
their one-sided shape. An end the likelihood never reaches is open. ``df`` is the runs
observed as points less one (at least 1; ``k - 1`` when every run is a bound): a bound
carries less information than a point, so it earns no degree of freedom (an uninformative
bound, far on its side, leaves the interval as the points alone give it). Not profiling
``tau`` out: that profile falls only logarithmically as ``tau`` grows with ``|mu|``, so with
few runs its interval spans many decades ([2e-5, 6e8]x on five toy seeds, two of them bounds).
The test is the signed root ``r = sign(mu_hat) sqrt(2 (l_max - l(0, tau_hat)) / max(1, q))``
against ``t_df``; ``I^2 = tau^2 / (tau^2 + s^2)`` with the typical within-run variance ``s^2``
(Higgins & Thompson 2002); the prediction interval ``mu +- t_{df-1} sqrt(tau^2 + se^2)`` with
``se`` = half the interval / ``t_df``. The likelihood assumes the censoring carries no
information on the gap. When every informative run is a bound on the same side, ``mu`` has
no finite estimate: the pooled ratio is a one-sided bound (``bound``, ``ratio`` None, the
interval one-sided at ``level``) on the mean of these runs with ``tau = 0`` (with ``tau``
free, bounds exclude no mean), and there is no prediction interval. A run whose gap is
unbounded both ways (both sides censored the same way) or that has no transition carries
nothing on ``mu``: left out, with a note.

Which runs are pooled: runs of kind ``both`` (independent runs) when there are at least
``min_seeds`` of them, else the runs of the one kind present, else all runs (with a note:
data-only and weight-only runs share the reference run's other seed). With ``data`` and
``weight`` runs both present (PolyPythias 160m) each kind is pooled alone and the share of
between-run variance due to each is ``tau^2_data / (tau^2_data + tau^2_weight)`` (additive
model: log ratio = mu + D + W + e; ``tau^2_both`` is reported beside their sum as a check).

Shapes: per class, each run's verdict and their agreement (the share with the most common
verdict). The t50 of each class is pooled the same way (a censored t50 a bound).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import List, Optional, Sequence

import numpy as np
from scipy import optimize, special
from scipy import stats as sps

from stats.config import DEFAULTS
from stats.results import Results
from stats.units import BOUND_SIGN, format_number

#: A run's within-run variance is at least this (decades^2): a run whose draws are all equal
#: (a bound drawn as itself) must not take all the weight.
MIN_VARIANCE = 1e-6
#: |mu| (decades) beyond which the censored likelihood is taken to have no finite maximum.
MU_SPAN = 12.0
#: Largest tau (decades) the censored likelihood is maximised over.
TAU_MAX = 5.0


@dataclass
class Effect:
    """One run's log10 estimate ``value`` (or bound), its within-run ``variance`` and
    ``bound`` (None: a point; ``lower``: the true value is >= ``value``; ``upper``: <=)."""

    label: str
    value: float
    variance: float
    bound: Optional[str] = None


@dataclass
class MetaAnalysis(Results):
    """A random-effects pooled estimate on the log10 scale (module docstring)."""

    estimate: Optional[float]
    ci: list
    p_value: float
    tau2: float
    i2: float
    prediction_interval: list
    n: int
    n_bounds: int
    method: str
    level: float = 0.95
    tau2_ci: Optional[list] = None
    #: ``lower`` / ``upper``: every informative run is a bound on that side, so is the pooled value
    bound: Optional[str] = None
    notes: list = field(default_factory=list)

    def to_dict(self, scale: str = "ratio") -> dict:
        """On the ratio (or tokens) scale: ``10^`` of the log10 values; ``tau2`` stays in decades^2."""
        def up(v):
            return None if v is None or not np.isfinite(v) else float(10 ** v)

        return {scale: up(self.estimate), "ci": [up(v) for v in self.ci], "p_value": self.p_value,
                "prediction_interval": [up(v) for v in self.prediction_interval], "tau2": self.tau2,
                "tau2_ci": self.tau2_ci, "i2": self.i2, "n": self.n, "n_bounds": self.n_bounds, "bound": self.bound,
                "method": self.method, "level": self.level, "log10_estimate": self.estimate,
                "log10_ci": list(self.ci), "notes": list(self.notes)}


def _t(level: float, df: int) -> float:
    return float(sps.t.ppf(0.5 + level / 2, df))


def q_profile(y, v, level: float = 0.95) -> list:
    """Q-profile interval of tau^2 (Viechtbauer 2007): the tau^2 whose generalised Q,
    ``sum (y_i - mu(tau^2))^2 / (v_i + tau^2)``, lies between the chi-square(k-1) quantiles."""
    y, v = np.asarray(y, float), np.asarray(v, float)
    k = len(y)

    def q_gen(t2):
        w = 1 / (v + t2)
        mu = (w * y).sum() / w.sum()
        return float((w * (y - mu) ** 2).sum())

    out = []
    for target in (sps.chi2.ppf(0.5 + level / 2, k - 1), sps.chi2.ppf(0.5 - level / 2, k - 1)):
        if q_gen(0.0) <= target:
            out.append(0.0)
            continue
        hi = max(float(np.var(y)), 1e-4)
        while q_gen(hi) > target and hi < 1e6:
            hi *= 4
        out.append(float(optimize.brentq(lambda t2: q_gen(t2) - target, 0.0, hi)) if hi < 1e6 else None)
    return out


def hartung_knapp(y, v, level: float = 0.95, method: str = DEFAULTS.pooling.tau2_method) -> MetaAnalysis:
    """Random-effects pooling of points ``y`` with within-run variances ``v`` (module docstring); ``method``:
    statsmodels' ``combine_effects`` tau^2 estimator (``pm``: Paule-Mandel, ``dl``: DerSimonian-Laird)."""
    from statsmodels.stats.meta_analysis import combine_effects  # statsmodels (heavy) only when runs are pooled

    y, v = np.asarray(y, float), np.maximum(np.asarray(v, float), MIN_VARIANCE)
    k = len(y)
    with np.errstate(divide="ignore", invalid="ignore"):  # statsmodels' I^2 divides by Q (0 for identical runs)
        res = combine_effects(y, v, method_re=method, use_t=True, alpha=1 - level)
    tau2 = max(float(res.tau2), 0.0)
    w = 1 / (v + tau2)
    mu = float((w * y).sum() / w.sum())
    q = float((w * (y - mu) ** 2).sum() / (k - 1))
    se = math.sqrt(max(1.0, q) / w.sum())
    half = _t(level, k - 1) * se
    p = float(sps.t.sf(mu / se, k - 1))
    i2 = max(0.0, 1 - (k - 1) / float(res.q)) if res.q > 0 else 0.0
    pi = [None, None] if k < 3 else [mu - _t(level, k - 2) * math.sqrt(tau2 + se**2),
                                     mu + _t(level, k - 2) * math.sqrt(tau2 + se**2)]
    notes = [] if k >= 3 else ["prediction interval needs 3 runs or more"]
    return MetaAnalysis(mu, [mu - half, mu + half], p, tau2, i2, pi, k, 0, f"random effects ({method.upper()} tau^2), "
                        "Hartung-Knapp t interval", level, q_profile(y, v, level), None, notes)


_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


def _loglik(mu, tau, y, v, bounds) -> float:
    """Log-likelihood of the censored random-effects model; ``bounds`` an array of 0 (a point),
    +1 (a lower bound) or -1 (an upper bound)."""
    s = np.sqrt(v + tau**2)
    z = (y - mu) / s
    ll = np.where(bounds == 0, -0.5 * z**2 - _LOG_SQRT_2PI - np.log(s), special.log_ndtr(-bounds * z))
    return float(ll.sum())


def _fit(y, v, bounds) -> tuple:
    """(mu_hat, tau_hat, l_max) of the censored likelihood, mu within +- MU_SPAN."""
    best = None
    sd = float(np.std(y)) if len(y) > 1 else 0.1
    for tau0 in (0.01, max(sd, 0.02), 0.5):
        res = optimize.minimize(lambda p: -_loglik(p[0], p[1], y, v, bounds), x0=[float(np.mean(y)), tau0],
                                method="L-BFGS-B", bounds=[(-MU_SPAN, MU_SPAN), (0.0, TAU_MAX)])
        if best is None or res.fun < best.fun:
            best = res
    return float(best.x[0]), float(best.x[1]), -float(best.fun)


def _likelihood_limit(mu_hat, l_max, crit, direction, y, v, bounds, tau) -> Optional[float]:
    """The mu beyond mu_hat (``direction`` +1 / -1) where 2 (l_max - l(mu, tau)) reaches ``crit``; None if
    it never does within +- MU_SPAN (an open end)."""
    def f(m):
        return 2 * (l_max - _loglik(m, tau, y, v, bounds)) - crit

    end = -MU_SPAN if direction < 0 else MU_SPAN
    step, inner = 0.05, mu_hat
    while inner != end:
        outer = max(inner - step, end) if direction < 0 else min(inner + step, end)
        if f(outer) > 0:
            return float(optimize.brentq(f, min(inner, outer), max(inner, outer), xtol=1e-6))
        inner, step = outer, step * 2
    return None


def censored_likelihood(y, v, bounds: Sequence[Optional[str]], level: float = 0.95) -> MetaAnalysis:
    """Random-effects pooling with runs that are bounds (the interval-censored likelihood of the
    module docstring): ML estimates, the likelihood interval at tau_hat with Hartung-Knapp's t calibration."""
    y, v = np.asarray(y, float), np.maximum(np.asarray(v, float), MIN_VARIANCE)
    k, n_bounds = len(y), sum(b is not None for b in bounds)
    bounds = np.array([{None: 0.0, "lower": 1.0, "upper": -1.0}[b] for b in bounds])
    mu, tau, l_max = _fit(y, v, bounds)
    n_points = k - n_bounds
    df = max(1, n_points - 1) if n_points else max(1, k - 1)  # a bound is not credited with a degree of freedom
    method = "random effects, interval-censored likelihood (bounds as bounds), Hartung-Knapp-scaled t interval at tau_hat"
    w = 1 / v
    s2 = (k - 1) * w.sum() / (w.sum() ** 2 - (w**2).sum())
    i2 = float(tau**2 / (tau**2 + s2))
    if abs(mu) >= MU_SPAN - 1e-3:  # no finite maximum: every informative run bounds the same side
        side = "lower" if mu > 0 else "upper"
        l_sup = _loglik(np.sign(mu) * 1e3, 0.0, y, v, bounds)
        crit = float(sps.t.ppf(level, df)) ** 2
        limit = _likelihood_limit(np.sign(mu) * MU_SPAN, l_sup, crit, -np.sign(mu), y, v, bounds, 0.0)
        r = math.sqrt(max(0.0, 2 * (l_sup - _loglik(0.0, 0.0, y, v, bounds)))) * np.sign(mu)
        ci = [limit, None] if side == "lower" else [None, limit]
        return MetaAnalysis(None, ci, float(sps.t.sf(r, df)), 0.0, 0.0, [None, None], k, n_bounds, method, level,
                            None, side, [f"every informative run is a {side} bound: the pooled ratio is a {side} bound "
                                         f"(one-sided {level:.0%} limit) on the mean of these runs, with tau^2 = 0 (the "
                                         "between-run variance cannot be estimated from bounds alone): no prediction "
                                         "for a new run"])
    # Hartung-Knapp's scale max(1, q) over the runs seen as points (module docstring)
    points = bounds == 0
    wp = 1 / (v[points] + tau**2)
    q = float((wp * (y[points] - mu) ** 2).sum() / df) if n_points >= 2 else 1.0
    scale = max(1.0, q)
    crit = _t(level, df) ** 2 * scale
    lo = _likelihood_limit(mu, l_max, crit, -1, y, v, bounds, tau)
    hi = _likelihood_limit(mu, l_max, crit, +1, y, v, bounds, tau)
    r = math.sqrt(max(0.0, 2 * (l_max - _loglik(0.0, tau, y, v, bounds))) / scale) * (1 if mu > 0 else -1)
    p = float(sps.t.sf(r, df))
    pi = [None, None]
    if lo is not None and hi is not None and df >= 2:
        se = (hi - lo) / (2 * _t(level, df))
        half = _t(level, df - 1) * math.sqrt(tau**2 + se**2)
        pi = [mu - half, mu + half]
    return MetaAnalysis(mu, [lo, hi], p, tau**2, i2, pi, k, n_bounds, method, level, None, None,
                        [f"{n_bounds} of {k} runs enter as bounds (censored)"])


def meta_analysis(effects: Sequence[Effect], level: float = 0.95,
                  method: str = DEFAULTS.pooling.tau2_method) -> Optional[MetaAnalysis]:
    """Pool ``effects`` (points by :func:`hartung_knapp`; with any bound by
    :func:`censored_likelihood`); None for fewer than 2."""
    if len(effects) < 2:
        return None
    y = [e.value for e in effects]
    v = [e.variance for e in effects]
    if all(e.bound is None for e in effects):
        return hartung_knapp(y, v, level, method)
    return censored_likelihood(y, v, [e.bound for e in effects], level)


def gap_effect(label: str, gap, late, early, formation: str = "t50") -> tuple:
    """(:class:`Effect` or None, why not) of one run's fitted gap (:class:`stats.times.GapRatio`)
    from its two curve analyses' bootstrap draws."""
    if gap is None or gap.ratio is None or not np.isfinite(gap.ratio):
        return None, "no gap ratio (" + "; ".join(gap.notes if gap is not None else ["no curve"]) + ")"
    d_late = late.times.draws_t50
    d_early = early.times.draws_t50 if formation == "t50" else early.times.draws_onset
    if d_late is None or d_early is None:
        return None, "no bootstrap draws"
    b = min(len(d_late), len(d_early))
    return Effect(label, float(np.log10(gap.ratio)), float(np.var(d_late[:b] - d_early[:b])), gap.bound), None


def t50_effect(label: str, ca) -> Optional[Effect]:
    """The :class:`Effect` of one run's t50 of a class (a censored one: a bound); None without one."""
    t = None if ca is None else ca.times
    if t is None or t.draws_t50 is None or not t.t50:
        return None
    bound = {"left": "upper", "right": "lower"}.get(ca.censored)
    return Effect(label, float(np.log10(t.t50)), float(np.var(t.draws_t50)), bound)


def verdict(ca) -> str:
    """A run's verdict of one class: ``sharp``, ``gradual``, ``none``, or ``none (left-censored)``."""
    if ca is None:
        return "no curve"
    return ca.verdict.shape + (f" ({ca.censored}-censored)" if ca.censored else "")


def agreement(verdicts: Sequence[str]) -> dict:
    """Counts of the runs' verdicts, the most common one and the share of runs that have it."""
    counts = Counter(verdicts)
    modal, n = counts.most_common(1)[0] if counts else (None, 0)
    return {"counts": dict(counts), "modal": modal, "share": n / len(verdicts) if verdicts else None,
            "unanimous": len(counts) == 1}


def pooled_runs(kinds: Sequence[str], min_seeds: int) -> tuple:
    """(indices of the runs pooled, note) by the rule of the module docstring."""
    both = [i for i, k in enumerate(kinds) if k == "both"]
    if len(both) >= min_seeds:
        left = len(kinds) - len(both)
        return both, (f"pooled: the {len(both)} independent runs (kind both); the {left} data/weight-only runs "
                      "are in the variance split" if left else None)
    if len(set(kinds)) == 1:
        return list(range(len(kinds))), (None if kinds[0] == "both" else
                                         f"pooled: {kinds[0]}-seed runs only: the prediction is for a new {kinds[0]} seed")
    return list(range(len(kinds))), ("pooled: runs of different kinds (data-only and weight-only runs share the "
                                     "reference run's other seed, so they are not independent draws of a new run)")


#: The entries a :class:`PooledGap` takes from its :class:`MetaAnalysis` record (``MetaAnalysis.to_dict``),
#: by its name there where that differs, and the value when the group is not pooled.
POOLED_ENTRIES = {"ratio": ("ratio", None), "ci": ("ci", [None, None]), "p_value": ("p_value", None),
                  "prediction_interval": ("prediction_interval", [None, None]), "tau2": ("tau2", None),
                  "tau2_ci": ("tau2_ci", None), "i2": ("i2", None), "bound": ("bound", None), "n_pooled": ("n", None),
                  "n_bounds": ("n_bounds", None), "method": ("method", None), "log10_ratio": ("log10_estimate", None),
                  "log10_ci": ("log10_ci", None)}


@dataclass(kw_only=True)
class PooledGap(Results):
    """One group of runs (a seed suite): each run's times, shapes and gap, and the pooled gap (its
    entries those of :attr:`pooled`'s record, :data:`POOLED_ENTRIES`)."""

    EXCLUDE = ("pooled",)

    model: str
    n_seeds: int
    ratio: Optional[float] = field(init=False)
    ci: list = field(init=False)
    p_value: Optional[float] = field(init=False)
    prediction_interval: list = field(init=False)
    tau2: Optional[float] = field(init=False)
    tau2_ci: Optional[list] = field(init=False)
    i2: Optional[float] = field(init=False)
    bound: Optional[str] = field(init=False)
    n_pooled: Optional[int] = field(init=False)
    n_bounds: Optional[int] = field(init=False)
    method: Optional[str] = field(init=False)
    log10_ratio: Optional[float] = field(init=False)
    log10_ci: Optional[list] = field(init=False)
    level: float = 0.95
    late_class: str
    early_class: str
    formation: str
    per_seed: list
    shapes: dict = field(default_factory=dict)
    t50: dict = field(default_factory=dict)
    variance_share: Optional[dict] = None
    null: str = field(init=False, default="pooled t_late / t_early <= 1")
    #: the group's notes, then the pooling's
    notes: list = field(default_factory=list)
    pooled: Optional[MetaAnalysis]

    def __post_init__(self):
        d = self.pooled.to_dict() if self.pooled is not None else {}
        for name, (key, default) in POOLED_ENTRIES.items():
            setattr(self, name, d.get(key, default))
        self.notes = self.notes + d.get("notes", [])

    def summary(self) -> str:
        """One line: the pooled ratio with both intervals, tau^2, I^2 and the shape agreement."""
        if self.pooled is None:
            return f"{self.model}: {self.n_seeds} run(s), no pooled gap ({'; '.join(self.notes) or 'too few runs'})"
        sign = BOUND_SIGN.get(self.bound, "")
        value = format_number(self.ratio) if self.ratio is not None else format_number(self.ci[0] if self.bound == "lower" else self.ci[1])
        shapes = ", ".join(f"{c} {a['modal']} in {a['counts'][a['modal']]} of {sum(a['counts'].values())}"
                           for c, a in self.shapes.items() if a["modal"] is not None)
        return (f"{self.model}: pooled {self.late_class}/{self.early_class} gap {sign}{value}x over {self.n_pooled} "
                f"runs, {self.level:.0%} CI {_interval(self.ci)}, prediction interval for a new run "
                f"{_interval(self.prediction_interval)}, p = {format_number(self.p_value)}, tau^2 = {format_number(self.tau2)} "
                f"decades^2, I^2 = {format_number(self.i2, '{:.0%}')}" + (f"; shapes: {shapes}" if shapes else ""))


def _interval(ci) -> str:
    return "[" + ", ".join(format_number(v) for v in (ci or [None, None])) + "]"


def variance_share(effects: Sequence[Effect], kinds: Sequence[str], level: float, method: str) -> Optional[dict]:
    """Between-run variance of the data-only and of the weight-only runs (each kind pooled on
    its own) and the share due to each; None unless both kinds have 2 runs or more."""
    fits = {}
    for kind in ("data", "weight", "both"):
        sub = [e for e, k in zip(effects, kinds) if k == kind]
        fits[kind] = meta_analysis(sub, level, method) if len(sub) >= 2 else None
    if fits["data"] is None or fits["weight"] is None:
        return None
    td, tw = fits["data"].tau2, fits["weight"].tau2
    total = td + tw
    return {"tau2_data": td, "tau2_weight": tw, "tau2_both": None if fits["both"] is None else fits["both"].tau2,
            "share_data": None if total <= 0 else td / total, "share_weight": None if total <= 0 else tw / total,
            "n_data": fits["data"].n, "n_weight": fits["weight"].n,
            "rule": "additive: log ratio = mu + data effect + weight effect + noise; each kind pooled alone; "
                    "tau2_both is reported beside tau2_data + tau2_weight as a check"}


def pool_group(group: str, labels: Sequence[str], seeds: dict, by_key: dict, gaps: dict, cfg) -> PooledGap:
    """The :class:`PooledGap` of one group's runs ``labels`` (their :class:`RunSeed` in ``seeds``),
    from the curve analyses ``by_key`` ((model, class) -> analysis) and fitted gaps (model -> gap)."""
    tc, pc, level = cfg.times, cfg.pooling, cfg.level
    per_seed, effects, kinds, notes = [], [], [], []
    for label in labels:
        late, early = by_key.get((label, tc.late_class)), by_key.get((label, tc.early_class))
        gap = gaps.get(label)
        effect, why = gap_effect(label, gap, late, early, tc.formation) if late and early else (None, "a class missing")
        row = {"model": label, "seed": seeds[label].seed, "seed_kind": seeds[label].kind, "ratio": getattr(gap, "ratio", None),
               "ci": getattr(gap, "ratio_ci", None), "p_value": getattr(gap, "p_value", None),
               "bound": getattr(gap, "bound", None), "log10_ratio": getattr(effect, "value", None),
               "variance": getattr(effect, "variance", None), "used": False, "left_out": why}
        for cls, ca in ((tc.early_class, early), (tc.late_class, late)):
            t = getattr(ca, "times", None)
            row |= {f"shape.{cls}": verdict(ca), f"t50.{cls}": getattr(t, "t50", None),
                    f"t50_ci.{cls}": getattr(t, "t50_ci", None), f"censored.{cls}": getattr(ca, "censored", None)}
        per_seed.append(row)
        if effect is not None:
            effects.append(effect)
            kinds.append(seeds[label].kind)
        elif why:
            notes.append(f"{label} left out of the pooling: {why}")
    chosen, note = pooled_runs(kinds, pc.min_seeds) if kinds else ([], None)
    notes += [note] if note else []
    used = [effects[i] for i in chosen]
    for row in per_seed:
        row["used"] = any(e.label == row["model"] for e in used)
    pooled = meta_analysis(used, level, pc.tau2_method) if len(used) >= pc.min_seeds else None
    if pooled is None:
        notes.append(f"{len(used)} informative run(s) < analysis.pooling.min_seeds = {pc.min_seeds}: no pooled gap")
    used_labels = [e.label for e in used] or list(labels)
    shapes, t50 = {}, {}
    for head_class in (tc.early_class, tc.late_class):
        shapes[head_class] = agreement([verdict(by_key.get((m, head_class))) for m in used_labels])
        eff = [e for e in (t50_effect(m, by_key.get((m, head_class))) for m in used_labels) if e is not None]
        fit = meta_analysis(eff, level, pc.tau2_method)
        t50[head_class] = None if fit is None else fit.to_dict("t50")
    return PooledGap(model=group, late_class=tc.late_class, early_class=tc.early_class, formation=tc.formation,
                     per_seed=per_seed, pooled=pooled, n_seeds=len(labels), shapes=shapes, t50=t50,
                     variance_share=variance_share(effects, kinds, level, pc.tau2_method), level=level, notes=notes)


def pool_seeds(results, by_key: dict, gaps: Sequence, cfg) -> List[PooledGap]:
    """One :class:`PooledGap` per seed group of ``results`` with at least 2 runs
    (:meth:`stats.tracked.TrackedResults.seed_groups`)."""
    if not cfg.pooling.enabled:
        return []
    by_model = {g.model: g for g in gaps}
    return [pool_group(group, labels, results.seeds, by_key, by_model, cfg)
            for group, labels in results.seed_groups().items() if len(labels) >= 2]


def pooled_table(groups: Sequence[PooledGap]):
    """One row per run of every group (``tables/pooled_gaps.csv``): the run's gap and shapes, then
    its group's pooled ratio, intervals, tau^2 and I^2."""
    import pandas as pd

    rows = []
    for g in groups:
        for r in g.per_seed:
            row = {k: v for k, v in r.items() if not isinstance(v, (list, dict))}
            lo, hi = r["ci"] or [None, None]
            rows.append({"group": g.model, **row, "ratio_lo": lo, "ratio_hi": hi, "pooled_ratio": g.ratio,
                         "pooled_lo": g.ci[0], "pooled_hi": g.ci[1], "pooled_p": g.p_value,
                         "prediction_lo": g.prediction_interval[0], "prediction_hi": g.prediction_interval[1],
                         "tau2": g.tau2, "i2": g.i2, "pooled_bound": g.bound})
    return pd.DataFrame(rows)
