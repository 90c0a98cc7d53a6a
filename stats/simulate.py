"""Simulated curves with known answers (for the known-answer tests and benchmarks).

Two generative models, each scored against a :class:`Truth` (t50, censoring, shape):

- *Head populations* (:class:`HeadPopulation`): the same ``n`` heads followed across
  revisions, as a screen sees them; ``k_j = #{on at t_j}`` are cumulative counts, not
  independent draws.
- *Aggregate curves* (:class:`AggregateCurve`): independent (beta-)binomial draws
  ``k ~ Binomial(n, p(t))`` at every revision around a known probability curve, as a
  source without head identity (``source=csv``) sees them.

The families of :func:`family` are the named cases the calibration and
operating-characteristic benchmarks and the tests use.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np
import pandas as pd
from scipy.special import expit
from scipy.stats import norm

from emergence.common.contract import flag_column, selectivity_column
from stats.bootstrap import simulate_counts
from stats.errors import StatsError
from stats.models.logistic import LN9
from stats.tracked import Curve


def logspaced_tokens(first: float = 1e9, last: float = 3e11, m: int = 10) -> np.ndarray:
    """``m`` token counts evenly spaced in log10 from ``first`` to ``last``."""
    return np.logspace(np.log10(first), np.log10(last), m)


def logistic_probability(tokens, floor: float, ceiling: float, t50: float, width_decades: float) -> np.ndarray:
    """p(t) = floor + (ceiling - floor) expit(2 ln 9 / width * (log10 t - log10 t50))."""
    s = 2 * LN9 / width_decades
    return floor + (ceiling - floor) * expit(s * (np.log10(np.asarray(tokens, float)) - np.log10(t50)))


def step_probability(tokens, before: float, after: float, last_before: int) -> np.ndarray:
    """p = before at revisions 0..last_before, after from the next revision on."""
    p = np.full(len(tokens), float(before))
    p[last_before + 1 :] = after
    return p


def simulate_counts_once(p, n, rng: np.random.Generator, dispersion: float = 1.0) -> np.ndarray:
    """One count vector around probabilities ``p`` with totals ``n``."""
    n = np.broadcast_to(np.asarray(n, int), np.shape(p))
    return simulate_counts(p, n, 1, rng, dispersion)[0]


def curves_frame(model: str, head_class: str, tokens, k, n) -> pd.DataFrame:
    """A CSV-format table (model, class, tokens, k, n, revision ``t<tokens>``, pretraining_corpus ``simulated``)."""
    tokens = np.asarray(tokens, float)
    return pd.DataFrame({
        "model": model, "class": head_class, "tokens": tokens, "k": np.asarray(k, int),
        "n": np.broadcast_to(np.asarray(n, int), tokens.shape), "revision": [f"t{int(t)}" for t in tokens],
        "pretraining_corpus": "simulated",
    })


def pr_lead_heads(tokens, n_heads: int, n_induction: int, lead_revisions, rng: np.random.Generator,
                  crossing=None) -> pd.DataFrame:
    """A per-head table of model ``sim`` with a known PR lead.

    Heads ``0 .. n_induction - 1`` become induction heads at revision ``crossing[h]``
    (default: drawn from the middle revisions) and their PR is elevated to ~ Normal(40, 1) from
    ``crossing[h] - lead_revisions[h]`` on (a negative lead: elevated after crossing).
    Other heads keep PR ~ Normal(20, 1). Columns: model, revision, tokens,
    layer, head, pr, flag.induction, selectivity.induction.
    """
    tokens = np.asarray(tokens, float)
    m = len(tokens)
    lead = np.broadcast_to(np.asarray(lead_revisions, int), (n_induction,))
    if crossing is None:
        lo = max(int(lead.max()), 0) + 1
        hi = m - 1 + min(int(lead.min()), 0)
        crossing = rng.integers(lo, max(hi, lo + 1), size=n_induction)
    crossing = np.broadcast_to(np.asarray(crossing, int), (n_induction,))
    rows = []
    per_layer = max(int(np.sqrt(n_heads)), 1)
    for r in range(m):
        for h in range(n_heads):
            pr = 20.0 + rng.standard_normal()
            flag = 0
            sel = 1.0 + rng.random()
            if h < n_induction:
                if r >= crossing[h] - lead[h]:
                    pr = 40.0 + rng.standard_normal()
                if r >= crossing[h]:
                    flag, sel = 1, 100.0 + h
            rows.append(("sim", f"t{int(tokens[r])}", tokens[r], h // per_layer, h % per_layer, pr, flag, sel))
    columns = ["model", "revision", "tokens", "layer", "head", "pr", flag_column("induction"), selectivity_column("induction")]
    return pd.DataFrame(rows, columns=columns)


#: 10-90 width of a normal distribution in units of its standard deviation (2 z_0.9).
NORMAL_WIDTH_PER_SD = 2 * float(norm.ppf(0.9))


@dataclass
class HeadPopulation:
    """Heads followed across revisions that switch on at their own times and stay on.

    ``log10 tau_h ~ Normal(log10 t50, spread_decades)`` for the ``n_switch`` switching
    heads (their 10-90 width is ``2.563 spread_decades``: a tight cluster is sharp, a wide
    spread gradual); ``n_always`` are on from the start; ``n_flicker`` heads near the
    threshold read on at each revision independently with probability ``flicker_p``; a
    switched-on head reads off at a revision with probability ``dropout``. ``n_heads`` is
    the model's total (the curve's ``n``).
    """

    n_heads: int
    n_switch: int
    t50: float
    spread_decades: float
    n_always: int = 0
    n_flicker: int = 0
    flicker_p: float = 0.5
    dropout: float = 0.0

    def __post_init__(self):
        if self.n_switch + self.n_always + self.n_flicker > self.n_heads:
            raise StatsError(f"n_switch + n_always + n_flicker = {self.n_switch + self.n_always + self.n_flicker} "
                             f"exceeds n_heads = {self.n_heads}; choose counts that sum to at most n_heads")

    def simulate(self, tokens, rng: np.random.Generator, switch_log10=None) -> "SimulatedPopulation":
        """One population's flags at ``tokens``; ``switch_log10`` fixes the switch-on times."""
        tokens = np.asarray(tokens, float)
        x = np.log10(tokens)
        if switch_log10 is None:
            switch_log10 = rng.normal(np.log10(self.t50), self.spread_decades, self.n_switch)
        switch_log10 = np.asarray(switch_log10, float)
        m = len(tokens)
        flags = np.zeros((m, self.n_heads), bool)
        s = len(switch_log10)
        flags[:, :s] = x[:, None] >= switch_log10[None, :]
        if self.dropout > 0:
            flags[:, :s] &= rng.random((m, s)) >= self.dropout
        flags[:, s : s + self.n_always] = True
        f0 = s + self.n_always
        flags[:, f0 : f0 + self.n_flicker] = rng.random((m, self.n_flicker)) < self.flicker_p
        return SimulatedPopulation(tokens, flags, switch_log10)


@dataclass
class SimulatedPopulation:
    """Flags (m revisions x n heads) of one simulated population and its truth."""

    tokens: np.ndarray
    flags: np.ndarray
    switch_log10: np.ndarray

    @property
    def k(self) -> np.ndarray:
        return self.flags.sum(1)

    @property
    def n(self) -> np.ndarray:
        return np.full(len(self.tokens), self.flags.shape[1])

    def truth(self) -> dict:
        """Where the switching heads switch: per checkpoint interval, the number of
        heads (``interval_heads``) and the share of them (``interval_share``); the
        largest share ``max_share`` and its interval index ``max_interval``; heads
        switching before the first or after the last revision are counted as outside."""
        x = np.log10(self.tokens)
        j = np.searchsorted(x, self.switch_log10, side="left") - 1  # tau in (x_j, x_j+1]
        inside = (j >= 0) & (j < len(x) - 1)
        counts = np.bincount(j[inside], minlength=len(x) - 1)
        share = counts / max(len(self.switch_log10), 1)
        i = int(np.argmax(share))
        return {"interval_heads": counts, "interval_share": share, "max_share": float(share[i]), "max_interval": i}

    def frame(self, model: str = "sim", head_class: str = "bos") -> pd.DataFrame:
        """The curve as a CSV-format table (:func:`curves_frame`)."""
        return curves_frame(model, head_class, self.tokens, self.k, self.n)


@dataclass
class Truth:
    """What a simulated curve's analysis should find.

    ``t50``: tokens of the rise's midpoint (it may lie outside the screened range);
    ``censored``: ``"left"`` (t50 before the first revision), ``"right"`` (after the
    last) or None; ``shape``: ``"sharp"`` (at least half of the true rise inside the
    range lies between two adjacent revisions), ``"gradual"``, ``"none"`` (no rise),
    or None where the rise is censored (its shape is not observable); ``share``: that
    largest share; ``decline``: the curve falls again after its peak.
    """

    t50: float
    censored: Optional[str]
    shape: Optional[str]
    share: float
    decline: bool = False


def _flat_truth(decline: bool) -> Truth:
    return Truth(float("nan"), None, "none", 0.0, decline)


def _rise_truth(t50: float, x50: float, x, share: float, decline: bool) -> Truth:
    """The :class:`Truth` of a rise with midpoint ``t50`` (``x50`` its log10) and largest share ``share``
    between adjacent revisions at log10 tokens ``x``."""
    censored = "left" if x50 < x[0] else ("right" if x50 > x[-1] else None)
    return Truth(t50, censored, None if censored else ("sharp" if share >= 0.5 else "gradual"), share, decline)


#: Kinds of :class:`AggregateCurve`.
AGGREGATE_KINDS = ("logistic", "ramp", "step", "flat")


@dataclass
class AggregateCurve:
    """Fresh (beta-)binomial draws at every revision around a known ``p(t)``.

    ``kind``: ``logistic`` (10-90 width ``width_decades``), ``ramp`` (linear in log10
    tokens over ``width_decades`` centred on ``t50``), ``step`` (at ``t50``) or
    ``flat`` (``floor`` throughout). With ``decline_to`` the curve falls after its
    rise, a logistic drop from ``ceiling`` to ``decline_to`` centred on
    ``decline_t50`` with 10-90 width ``decline_width``. ``dispersion`` > 1 draws
    beta-binomial counts (variance ``phi n p (1 - p)``).
    """

    kind: str = "logistic"
    floor: float = 0.02
    ceiling: float = 0.5
    t50: float = 1e11
    width_decades: float = 1.0
    dispersion: float = 1.0
    decline_to: Optional[float] = None
    decline_t50: Optional[float] = None
    decline_width: float = 0.5

    def __post_init__(self):
        if self.kind not in AGGREGATE_KINDS:
            raise StatsError(f"AggregateCurve kind={self.kind!r}; valid: {list(AGGREGATE_KINDS)}")
        if self.decline_to is not None and self.decline_t50 is None:
            raise StatsError("AggregateCurve: decline_to needs decline_t50")

    def rise(self, tokens) -> np.ndarray:
        """The rising part of ``p`` at ``tokens`` (no decline)."""
        x = np.log10(np.asarray(tokens, float))
        x50, lo, hi = np.log10(self.t50), self.floor, self.ceiling
        if self.kind == "flat":
            return np.full(x.shape, float(lo))
        if self.kind == "step":
            return np.where(x < x50, lo, hi).astype(float)
        if self.kind == "ramp":
            return lo + (hi - lo) * np.clip((x - x50) / self.width_decades + 0.5, 0.0, 1.0)
        return logistic_probability(tokens, lo, hi, self.t50, self.width_decades)

    def probability(self, tokens) -> np.ndarray:
        p = self.rise(tokens)
        if self.decline_to is not None:
            p = p - (self.ceiling - self.decline_to) * logistic_probability(tokens, 0.0, 1.0, self.decline_t50,
                                                                             self.decline_width)
        return np.clip(p, 0.0, 1.0)

    def truth(self, tokens) -> Truth:
        decline = self.decline_to is not None
        if self.kind == "flat" or self.ceiling == self.floor:
            return _flat_truth(decline)
        p = self.rise(tokens)
        rise = p[-1] - p[0]
        share = float(np.diff(p).max() / rise) if rise > 0 else 0.0
        return _rise_truth(float(self.t50), float(np.log10(self.t50)), np.log10(np.asarray(tokens, float)), share,
                           decline)

    def simulate(self, tokens, n, rng: np.random.Generator) -> "SimulatedCurve":
        tokens = np.asarray(tokens, float)
        n = np.broadcast_to(np.asarray(n, int), tokens.shape).copy()
        k = simulate_counts_once(self.probability(tokens), n, rng, self.dispersion)
        return SimulatedCurve(tokens, k, n, self.truth(tokens), identity=False)


@dataclass
class SimulatedCurve:
    """One simulated curve (k of n at ``tokens``), its :class:`Truth`, and whether its
    counts follow the same heads (``identity``: the regime its analysis should use)."""

    tokens: np.ndarray
    k: np.ndarray
    n: np.ndarray
    truth: Truth
    identity: bool
    #: (revisions x heads) flags of a head population (None for aggregate draws)
    flags: Optional[np.ndarray] = None
    #: log10 switch-on times of a head population's switching heads (None for aggregate draws)
    switch_log10: Optional[np.ndarray] = None

    def curve(self, model: str = "sim", head_class: str = "bos"):
        """A :class:`stats.tracked.Curve` of this simulation (revisions ``r0``, ``r1``, ...); a
        revision at 0 tokens (step 0) is left out and noted in ``dropped``, as the sources do."""
        revisions = np.array([f"r{i}" for i in range(len(self.tokens))])
        keep = np.asarray(self.tokens, float) > 0
        dropped = [f"{r} (tokens=0.0, n={n})" for r, n in zip(revisions[~keep], np.asarray(self.n)[~keep])]
        return Curve(model, head_class, revisions[keep], self.tokens[keep], np.asarray(self.k, float)[keep],
                     np.asarray(self.n, float)[keep], dropped=dropped, identity=self.identity,
                     flags=None if self.flags is None else self.flags[keep],
                     flags_at_init=None if self.flags is None or keep.all() else self.flags[~keep][0])


def simulate_population(pop: "HeadPopulation", tokens, rng: np.random.Generator, n_decline: int = 0,
                        decline_t50: Optional[float] = None, decline_spread: float = 0.1,
                        switch_log10=None) -> SimulatedCurve:
    """A :class:`HeadPopulation` as a :class:`SimulatedCurve`; ``n_decline`` of its switching
    heads switch off again at ``log10 ~ Normal(log10 decline_t50, decline_spread)`` (never
    before their own switch-on): a rise then a partial decline. ``switch_log10`` fixes the
    switch-on times (:meth:`HeadPopulation.simulate`). Its truth's t50 is the median switch-on time of
    the switching heads (the midpoint of their rise above the always-on floor)."""
    sim = pop.simulate(tokens, rng, switch_log10)
    flags = sim.flags.copy()
    x = np.log10(sim.tokens)
    if n_decline:
        off = np.maximum(rng.normal(np.log10(decline_t50), decline_spread, n_decline), sim.switch_log10[:n_decline])
        flags[:, :n_decline] &= x[:, None] < off[None, :]
    if sim.switch_log10.size == 0:
        truth = _flat_truth(n_decline > 0)
    else:
        x50 = float(np.median(sim.switch_log10))
        truth = _rise_truth(float(10**x50), x50, x, sim.truth()["max_share"], n_decline > 0)
    k = flags.sum(1)
    return SimulatedCurve(sim.tokens, k, np.full(len(k), flags.shape[1]), truth, identity=True, flags=flags,
                          switch_log10=sim.switch_log10)


def _t50_between(x, lo: int, hi: int, rng) -> float:
    """A t50 drawn log-uniformly between revisions ``lo`` and ``hi`` (``x``: log10 tokens)."""
    return float(10 ** rng.uniform(x[lo], x[hi]))


def family(name: str, tokens, rng: np.random.Generator) -> SimulatedCurve:
    """One draw of a named simulated family (see :data:`FAMILIES`) at ``tokens``.

    Widths are in units of the checkpoint spacing ``d`` (the log10 gap of adjacent
    revisions); t50 is drawn uniformly in log10 tokens between the 3rd and the
    third-last revision (inside families), or 0.5-2 spacings outside the range
    (censored families).
    """
    if name not in FAMILIES:
        raise StatsError(f"unknown simulated family {name!r}; valid: {list(FAMILIES)}")
    tokens = np.asarray(tokens, float)
    x = np.log10(tokens)
    m = len(x)
    d = float(np.median(np.diff(x)))
    inside = _t50_between(x, 2, m - 3, rng)
    lo, hi = rng.uniform(0.0, 0.05), rng.uniform(0.4, 0.8)
    regime, kind = name.split("/")
    # every family's parameters are drawn, whichever is asked for: the draws' order fixes each family's stream
    if regime == "aggregate":
        n = rng.integers(48, 257, size=m) if kind == "unequal-n" else np.full(m, 128)
        spec = {
            "logistic-sharp": dict(kind="logistic", width_decades=rng.uniform(0.1, 0.5) * d),
            "logistic-gradual": dict(kind="logistic", width_decades=rng.uniform(3.0, 5.0) * d),
            "ramp": dict(kind="ramp", width_decades=rng.uniform(4.0, 6.0) * d),
            "step": dict(kind="step"),
            "flat": dict(kind="flat", floor=rng.uniform(0.0, 0.3)),
            "left-censored": dict(kind="logistic", width_decades=rng.uniform(0.5, 2.0) * d,
                                  t50=10 ** (x[0] - rng.uniform(1.5, 3.0) * d), floor=0.0),
            "right-censored": dict(kind="logistic", width_decades=rng.uniform(0.5, 2.0) * d, floor=rng.uniform(0, 0.01),
                                   t50=10 ** (x[-1] + rng.uniform(1.5, 3.0) * d)),
            "rise-decline": dict(kind="logistic", width_decades=rng.uniform(0.1, 0.5) * d,
                                 t50=_t50_between(x, 1, m // 2 - 1, rng)),
            "unequal-n": dict(kind="logistic", width_decades=rng.uniform(0.1, 0.5) * d),
        }[kind]
        spec = {"floor": lo, "ceiling": hi, "t50": inside, **spec}
        if kind == "rise-decline":
            spec["decline_to"] = spec["ceiling"] * rng.uniform(0.4, 0.7)
            spec["decline_t50"] = 10 ** rng.uniform(np.log10(spec["t50"]) + 3 * d, x[-1] - d)
        return AggregateCurve(**spec).simulate(tokens, n, rng)
    spread = rng.uniform(0.1, 0.3) * d / NORMAL_WIDTH_PER_SD
    switching = int(rng.integers(60, 201))
    common = dict(n_heads=256, n_switch=switching, t50=inside, spread_decades=spread, n_flicker=4, flicker_p=0.5,
                  dropout=0.01)
    spec = {
        "sharp": {},
        "gradual": dict(spread_decades=rng.uniform(3.0, 5.0) * d / NORMAL_WIDTH_PER_SD),
        "flat": dict(n_switch=0, spread_decades=0.1, n_always=int(rng.integers(0, 61))),
        "left-censored": dict(t50=10 ** (x[0] - rng.uniform(1.5, 3.0) * d)),
        "right-censored": dict(t50=10 ** (x[-1] + rng.uniform(1.5, 3.0) * d)),
        "rise-decline": dict(t50=_t50_between(x, 1, m // 2 - 1, rng)),
        "circuit-3-of-256": dict(n_switch=3, spread_decades=0.05, n_flicker=2, flicker_p=0.2, dropout=0.05),
    }[kind]
    pop = HeadPopulation(**(common | spec))
    n_decline = int(switching * rng.uniform(0.3, 0.6))
    if kind != "rise-decline":
        return simulate_population(pop, tokens, rng)
    decline_t50 = 10 ** rng.uniform(np.log10(pop.t50) + 3 * d, x[-1] - d)
    return simulate_population(pop, tokens, rng, n_decline, decline_t50)


#: The simulated families of the calibration and operating-characteristic benchmarks:
#: ``aggregate/*`` (independent draws, no head identity) and ``population/*`` (the same
#: heads followed across revisions).
FAMILIES = tuple(f"aggregate/{k}" for k in ("logistic-sharp", "logistic-gradual", "ramp", "step", "flat", "left-censored",
                                            "right-censored", "rise-decline", "unequal-n")) + \
    tuple(f"population/{k}" for k in ("sharp", "gradual", "flat", "left-censored", "right-censored", "rise-decline",
                                      "circuit-3-of-256"))


def score(analysis, truth: Truth) -> dict:
    """How a curve analysis (:class:`stats.curve_analysis.CurveAnalysis`) fares against its truth.

    ``shape``: the verdict equals the true shape (``none`` for a censored truth: no transition inside
    the range), or is ``unresolved`` for a sharp or gradual truth (not a wrong verdict; the benchmarks
    count resolution apart); ``censored``: the censoring flag equals the truth's; ``covers``: the
    reported t50 interval contains the true t50 (:func:`t50_covered`: a censored bound covers when the
    truth lies on its side). Both None for a flat truth, which has no side.
    """
    expected = "none" if truth.censored else truth.shape
    shape = analysis.verdict.shape == expected or (expected in ("sharp", "gradual")
                                                   and analysis.verdict.shape == "unresolved")
    if truth.shape == "none" and not truth.censored:
        return {"shape": shape, "censored": None, "covers": None}
    covers = analysis.times is not None and t50_covered(analysis.times, truth.t50)
    return {"shape": shape, "censored": analysis.censored == truth.censored, "covers": covers}


def t50_covered(times, t50: float) -> bool:
    """Whether the reported t50 interval of ``times`` holds ``t50`` (an open end reaches to 0 or infinity)."""
    lo, hi = times.t50_ci
    return bool((0.0 if lo is None else lo) <= t50 <= (np.inf if hi is None else hi))


def gap_pair(regime: str, tokens, t50_early: float, ratio: float, rng: np.random.Generator) -> tuple:
    """An (early, late) pair of simulated curves whose t50s are ``t50_early`` and ``ratio`` x
    it (the separation benchmark): ``aggregate`` logistic draws on 128 heads (early ceiling
    U(0.2, 0.5), late U(0.4, 0.8)), or ``population`` heads of 256 (early 20-60 switching,
    late 60-200); 10-90 widths U(0.5, 2) checkpoint spacings."""
    x = np.log10(np.asarray(tokens, float))
    d = float(np.median(np.diff(x)))
    out = []
    for t50, top in ((t50_early, (0.2, 0.5)), (t50_early * ratio, (0.4, 0.8))):
        w = rng.uniform(0.5, 2.0) * d
        if regime == "aggregate":
            c = AggregateCurve("logistic", rng.uniform(0, 0.03), rng.uniform(*top), t50, w)
            out.append(c.simulate(tokens, np.full(len(x), 128), rng))
        else:
            switching = int(rng.integers(20, 61) if top[0] < 0.4 else rng.integers(60, 201))
            pop = HeadPopulation(256, switching, t50, w / NORMAL_WIDTH_PER_SD, n_flicker=4, dropout=0.01)
            out.append(simulate_population(pop, tokens, rng))
    return tuple(out)


def seed_group(regime: str, tokens, ratio: float, tau: float, n_seeds: int, rng: np.random.Generator) -> list:
    """A seed suite with a known pooled gap: ``n_seeds`` runs whose log10 gap ratios are drawn
    ``theta_i ~ Normal(log10 ratio, tau)`` (decades), each an (early, late) pair of
    :func:`gap_pair` with the early t50 uniform in log10 tokens between the 3rd revision and
    the third-last less ``theta_i`` (both t50s inside the range). Returns ``[(early, late,
    theta_i)]``."""
    x = np.log10(np.asarray(tokens, float))
    out = []
    for _ in range(n_seeds):
        theta = float(np.log10(ratio) + tau * rng.standard_normal())
        lo, hi = x[2] - min(theta, 0.0), x[-3] - max(theta, 0.0)
        t50_early = float(10 ** rng.uniform(lo, max(hi, lo)))
        early, late = gap_pair(regime, tokens, t50_early, 10**theta, rng)
        out.append((early, late, theta))
    return out


def seed_group_frame(model: str, runs) -> pd.DataFrame:
    """A :func:`seed_group` as a CSV-format table (classes ``induction``, early, and ``bos``) with a ``seed``
    column (seeds 1, 2, ...)."""
    frames = [curves_frame(model, head_class, sim.tokens, sim.k, sim.n).assign(seed=seed)
              for seed, (early, late, _) in enumerate(runs, start=1)
              for head_class, sim in (("induction", early), ("bos", late))]
    return pd.concat(frames, ignore_index=True)
