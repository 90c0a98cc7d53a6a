"""Simulated studies drawn at random from the space real studies span (the benchmarks' ground).

A real study is one grid of checkpoints and a population of heads that forms somewhere on
it. :func:`sample_study` draws one from :class:`StudySpace` (every factor at random, none
at chosen points):

- **grid** (:func:`sample_grid`): ``log`` (evenly spaced in log10 tokens, first revision
  1e6-1e10 tokens, spanning 1-5 decades), ``linear`` (every N steps: ``a (o + i)`` tokens,
  the interval ``a`` 1e7-1e11, from the start ``o = 1`` or a window later in training) or
  ``pythia`` (a selection of Pythia's schedule: step 0, 1, 2, 4, ..., 512, then every 1000
  to 143000, 2,097,152 tokens a step; a random subset or a log-like one); ``revisions``
  5 to 150 revisions with positive tokens (more mass on small grids than log-uniform), and
  with probability ``p_step0`` (always for ``pythia`` when its selection draws it) a step 0
  at 0 tokens besides (the analysis leaves it out of log-token fits);
- **position** of the true t50 against the grid's positive revisions x_1 < ... < x_m
  (log10 tokens): ``before`` x_1 (up to 1 decade), in the ``first`` interval (x_1, x_2],
  ``inside`` (x_2, x_m-1], in the ``last`` interval (x_m-1, x_m], or ``after`` x_m (up to
  1 decade); uniform in log10 tokens within the drawn position;
- **width**: the 10-90 width of the rise, log-uniform over ``width_decades`` (0.02-3
  decades: very sharp to very gradual);
- **heads**: ``n_heads`` 64-1024 of which ``n_switch`` 3-400 (at most 60 %) switch on,
  both log-uniform; a background of always-on heads, heads flickering near the threshold,
  dropout of switched-on heads; with probability ``p_decline`` part of them switch off
  again later in the range (a rise then a decline); with probability ``p_flat`` nothing
  switches (a flat curve: the false-change rate);
- **regime**: ``identity`` (a :class:`~stats.simulate.HeadPopulation`: the same heads
  followed, per-head flags) or ``aggregate`` (an :class:`~stats.simulate.AggregateCurve`:
  fresh binomial or beta-binomial draws at every revision, dispersion 1 or 1.5-4).

Each :class:`SampledStudy` records its factors and its truth (:class:`StudyTruth`): t50 (the
median switch-on time of the switching heads, or the logistic's midpoint), the censoring side, the
true 10-90 width (the switch-on times' 10th to 90th percentile, or the logistic's), the position,
and the shape by the criterion ``C`` (decades; ``analysis.shape.sharp_width_decades``): ``sharp``
when the width is <= C, ``gradual`` when > C, ``none`` when flat. Which verdicts are right:
:meth:`StudyTruth.accepted` (and docs/statistics.md, "Over the space real studies span").

:func:`sample_pair` draws two classes of one study (same grid, regime and heads) whose
t50s are a given ratio apart, both inside the range: the separation benchmark.
:mod:`stats.space_scores` scores analyses against these truths, overall and by factor.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
from scipy.special import expit

from stats.models.logistic import LN9
from stats.simulate import NORMAL_WIDTH_PER_SD, AggregateCurve, HeadPopulation, SimulatedCurve, simulate_population

POSITIONS = ("before", "first", "inside", "last", "after")
STUDY_REGIMES = ("identity", "aggregate")
#: Pythia's checkpoint steps (step 0, 1, 2, 4, ..., 512, then every 1000 to 143000) and tokens a step.
PYTHIA_STEPS = np.array([0] + [2**i for i in range(10)] + list(range(1000, 143001, 1000)), float)
PYTHIA_TOKENS_PER_STEP = 2_097_152
#: The verdict's default criterion C (decades): ``analysis.shape.sharp_width_decades``.
DEFAULT_CRITERION = 0.5
#: A truth within this factor of C is borderline (either shape or ``unresolved`` accepted).
BORDERLINE_FACTOR = 1.5
#: A change is detectable when its oracle z (:func:`oracle_z`) is at least this.
DETECTABLE_Z = 4.0


@dataclass(frozen=True)
class StudySpace:
    """The ranges and probabilities :func:`sample_study` draws from (module docstring)."""

    grid_kinds: tuple = ("log", "linear", "pythia")
    revisions: tuple = (5, 150)
    #: probability of a step 0 at 0 tokens on a log or linear grid
    p_step0: float = 0.5
    #: probabilities of the positions of :data:`POSITIONS`
    positions: tuple = (0.12, 0.18, 0.40, 0.18, 0.12)
    width_decades: tuple = (0.02, 3.0)
    n_heads: tuple = (64, 1024)
    n_switch: tuple = (3, 400)
    max_switch_share: float = 0.6
    p_flat: float = 0.12
    p_decline: float = 0.12
    regimes: tuple = STUDY_REGIMES


def _log_uniform(rng, lo: float, hi: float) -> float:
    return float(np.exp(rng.uniform(np.log(lo), np.log(hi))))


def _log_uniform_int(rng, lo: int, hi: int, power: float = 1.0) -> int:
    """An integer in [lo, hi]: ``log m = log(lo - 1/2) + U^power (log(hi + 1/2) - log(lo - 1/2))``, log-uniform
    (``power`` 1) or with more mass on small values (1.5, the number of revisions: for 5-150 about 22 % 5-6,
    16 % 7-10, 18 % 11-20, 16 % 21-40, 27 % 41-150)."""
    a, b = np.log(lo - 0.5), np.log(hi + 0.5)
    return int(min(max(round(float(np.exp(a + (b - a) * rng.random() ** power))), lo), hi))


def pythia_selection(m: int, rng: np.random.Generator) -> np.ndarray:
    """``m`` distinct positive steps of Pythia's schedule (sorted): half the time a uniform
    random subset (mostly the every-1000 steps), else a log-like one (the nearest steps to m
    log-spaced points, filled up at random where two coincide)."""
    steps = PYTHIA_STEPS[1:]
    m = min(m, len(steps))
    if rng.random() < 0.5:
        return np.sort(rng.choice(steps, m, replace=False))
    lo = _log_uniform(rng, 1.0, 2000.0)
    target = np.geomspace(lo, steps[-1] / _log_uniform(rng, 1.0, 4.0), m)
    picked = set(steps[np.abs(np.log(steps)[None, :] - np.log(target)[:, None]).argmin(1)].tolist())
    rest = [s for s in steps if s not in picked and s >= lo]
    while len(picked) < m:
        picked.add(rest.pop(int(rng.integers(len(rest)))) if rest else float(rng.choice(steps)))
    return np.array(sorted(picked))


def _log_grid(m: int, rng) -> np.ndarray:
    """Evenly spaced in log10 tokens from 1e6-1e10, spanning 1-5 decades."""
    first = rng.uniform(6.0, 10.0)
    return np.logspace(first, first + rng.uniform(1.0, 5.0), m)


def _linear_grid(m: int, rng) -> np.ndarray:
    """Every N steps, ``a (o + i)`` tokens (``a`` 1e7-1e11): from the start (``o = 1``) or a later window."""
    start = 1 if rng.random() < 0.7 else int(rng.integers(2, 3 * m + 1))
    return 10 ** rng.uniform(7.0, 11.0) * (start + np.arange(m))


#: The grid kinds: ``m`` positive token counts of each.
GRIDS = {"log": _log_grid, "linear": _linear_grid,
         "pythia": lambda m, rng: pythia_selection(m, rng) * PYTHIA_TOKENS_PER_STEP}


def sample_grid(kind: str, m: int, rng: np.random.Generator, p_step0: float = 0.5) -> np.ndarray:
    """Token counts of a ``kind`` grid (:data:`GRIDS`) with ``m`` positive revisions, and a step 0 at
    0 tokens with probability ``p_step0`` (module docstring)."""
    if kind not in GRIDS:
        raise ValueError(f"grid kind {kind!r}; valid: {list(GRIDS)}")
    tokens = GRIDS[kind](m, rng)
    return np.concatenate([[0.0], tokens]) if rng.random() < p_step0 else tokens


def position_of(x50: float, x) -> str:
    """The position (:data:`POSITIONS`) of log10 t50 ``x50`` on positive log10 tokens ``x``."""
    if x50 <= x[0]:
        return "before"
    if x50 > x[-1]:
        return "after"
    if x50 <= x[1]:
        return "first"
    return "last" if x50 > x[-2] else "inside"


def sample_position(x, rng: np.random.Generator, probabilities=StudySpace.positions) -> float:
    """A log10 t50 drawn at a random position (uniform in log10 tokens inside it)."""
    pos = POSITIONS[int(rng.choice(len(POSITIONS), p=np.asarray(probabilities) / np.sum(probabilities)))]
    lo, hi = {"before": (x[0] - 1.0, x[0]), "first": (x[0], x[1]), "inside": (x[1], x[-2]),
              "last": (x[-2], x[-1]), "after": (x[-1], x[-1] + 1.0)}[pos]
    return float(rng.uniform(lo, hi))


@dataclass
class StudyTruth:
    """What the analysis of a sampled study should find (module docstring)."""

    t50: float
    censored: Optional[str]
    width_decades: float
    position: str
    decline: bool
    #: the criterion C (decades) the shape is judged by
    criterion: float
    #: the rise's 10 % and 90 % points (log10 tokens)
    x10: float = float("nan")
    x90: float = float("nan")
    #: the grid can tell its shape (:func:`grid_resolves`)
    grid_resolvable: bool = True
    #: the change's size against the noise at the grid's revisions (:func:`oracle_z`; inf: no noise)
    z: float = float("inf")
    #: a censored rise partly inside the range (its 10 % point before the last revision, or its 90 % point
    #: after the first): its start or its end is seen
    partly_seen: bool = False
    #: heads on from the first revision whatever the rise (followed heads' background; 0 for aggregates)
    present_at_start: float = 0.0
    #: the oracle standard error of log10 t50: :func:`oracle_t50_se` for aggregate counts,
    #: :func:`oracle_median_se` for followed heads
    t50_se: float = 0.0
    #: the shape's distance from the criterion against the noise (:func:`oracle_shape_z`; inf for
    #: followed heads, whose switch-on times the grid alone resolves)
    shape_z: float = float("inf")

    @property
    def detectable(self) -> bool:
        """The change stands out of the noise (:data:`DETECTABLE_Z`, module docstring)."""
        return self.flat or self.z >= DETECTABLE_Z

    @property
    def flat(self) -> bool:
        return not np.isfinite(self.t50)

    @property
    def shape(self) -> str:
        """``none`` (flat), ``sharp`` (width <= C) or ``gradual``; censored truths keep their shape."""
        if self.flat:
            return "none"
        return "sharp" if self.width_decades <= self.criterion else "gradual"

    @property
    def borderline(self) -> bool:
        return not self.flat and self.criterion / BORDERLINE_FACTOR <= self.width_decades <= BORDERLINE_FACTOR * self.criterion

    @property
    def shape_resolvable(self) -> bool:
        """The grid resolves the shape and the noise does not hide it (:attr:`shape_z`)."""
        return self.grid_resolvable and self.shape_z >= DETECTABLE_Z

    @property
    def resolvable(self) -> bool:
        return self.shape_resolvable and not self.borderline

    def accepted(self) -> tuple:
        """The verdicts scored as right. Flat: ``none``. Borderline (width in [C / 1.5, 1.5 C]): either
        shape or ``unresolved``. A shape the grid cannot resolve (:func:`grid_resolves`) or the noise
        hides (:attr:`shape_z` below :data:`DETECTABLE_Z`): its true shape or ``unresolved``, never the
        other; else the true shape alone. A censored truth: ``none``, and where its rise is
        :attr:`partly_seen` (which no grid resolves) its true shape or ``unresolved`` besides (where it
        places t50 is for t50 coverage to judge). ``none`` is right besides where the data cannot show
        the change: a rise in the last interval (seen at the last revision alone) or one the noise hides
        (:func:`oracle_z` below :data:`DETECTABLE_Z`; the benchmarks print the criteria over the
        detectable studies as well as over all)."""
        if self.flat or (self.censored and not self.partly_seen):
            return ("none",)
        if self.borderline:
            shapes = ("sharp", "gradual", "unresolved")
        else:  # (a censored truth is never grid-resolvable: no revisions on its far side)
            shapes = (self.shape,) if self.shape_resolvable else (self.shape, "unresolved")
        return shapes + (("none",) if self.censored or not self.detectable or self.position == "last" else ())


@dataclass
class SampledStudy:
    """One simulated study: its factors, its simulated curve and its truth."""

    factors: dict
    sim: SimulatedCurve
    truth: StudyTruth
    #: the (log10) switch-on times of the switching heads (identity) or None
    switch_log10: Optional[np.ndarray] = field(default=None, repr=False)

    def curve(self, model: str = "sim", head_class: str = "bos"):
        return self.sim.curve(model, head_class)


def _truth(x, x50: float, x10: float, x90: float, decline: bool, criterion: float) -> StudyTruth:
    """The truth of a rise with midpoint ``x50`` and 10 % / 90 % points ``x10`` / ``x90`` on positive
    log10 tokens ``x``."""
    censored = "left" if x50 < x[0] else ("right" if x50 > x[-1] else None)
    seen = (censored == "right" and x10 < x[-1]) or (censored == "left" and x90 > x[0])
    return StudyTruth(float(10**x50), censored, float(x90 - x10), position_of(x50, x), decline, criterion,
                      float(x10), float(x90), grid_resolves(x, x10, x90, criterion), partly_seen=bool(seen))


def grid_resolves(x, x10: float, x90: float, criterion: float) -> bool:
    """Whether revisions at log10 tokens ``x`` can tell a rise from ``x10`` to ``x90`` (its 10 % and 90 %
    points) sharp from gradual by ``criterion`` C: a sharp rise (width <= C) when the revisions that
    bracket it (the last at or before ``x10``, the first at or after ``x90``) are at most C apart, so
    that the data bound its width by C; a gradual one when revisions inside it lie more than C apart
    (the first and last of them bound its width from below, so that it exceeds C on this grid
    whatever the shape of the rise between checkpoints) and revisions outside it on both sides show
    its floor and its ceiling: without them the data cannot tell that the last revision lies below
    the rise's 90 % point (or the first above its 10 %), and a rise still under way at the end of
    the range reads, scaled to what is seen, narrower than it is. Either shape needs two revisions
    at or after the 90 % point: at the last revision alone heads may still be arriving, and only a
    revision after it shows that they stopped (:func:`stats.curve_analysis._still_arriving`)."""
    before, after = x[x <= x10], x[x >= x90]
    ceiling = after.size >= 2  # a revision past the 90 % point, and one more that shows the rise has stopped
    if x90 - x10 <= criterion:
        return bool(before.size and ceiling and after[0] - before[-1] <= criterion)
    inside = x[(x > x10) & (x < x90)]
    return bool(before.size and ceiling and inside.size >= 2 and inside[-1] - inside[0] > criterion)


def oracle_z(expected, variance) -> float:
    """The change's size against the noise: ``z = sqrt(sum_i (c_i - mean c)^2 / mean_i v_i)`` of the
    expected counts ``c_i`` at the grid's positive revisions and their noise variances ``v_i``
    (at least a quarter of a head squared): what a test that knew the curve's shape would
    see (its power at the 5 % level is 0.9 from z = 2.9); the analysis, which does not know it,
    is held to the changes with z >= :data:`DETECTABLE_Z`."""
    c = np.asarray(expected, float)
    v = max(float(np.mean(variance)), 0.25)
    return float(np.sqrt(np.sum((c - c.mean()) ** 2) / v))


def oracle_t50_se(tokens, n_heads: int, curve: AggregateCurve) -> float:
    """The standard error of log10 t50 that an oracle knowing everything but t50 would have from
    aggregate counts on the grid ``tokens``: ``1 / sqrt(I)``, ``I = sum_i (n dp_i / dx50)^2 / v_i``
    (Fisher information of the logistic's midpoint; ``v_i`` the counts' variance, at least a
    quarter of a head squared). The analysis, which also fits the floor, ceiling and width, is
    held to gaps of at least :data:`DETECTABLE_Z` of these (:func:`stats.space_scores.pair_bins`)."""
    tokens = np.asarray(tokens, float)
    p = curve.rise(tokens[tokens > 0])
    k = 2.0 * LN9 / curve.width_decades  # the logistic's slope in log10 tokens
    s = (p - curve.floor) / (curve.ceiling - curve.floor)  # its sigmoid, from p = floor + (ceiling - floor) s
    dp = (curve.ceiling - curve.floor) * k * s * (1.0 - s)
    v = np.maximum(curve.dispersion * n_heads * p * (1.0 - p), 0.25)
    info = float(np.sum((n_heads * dp) ** 2 / v))
    return float("inf") if info <= 0 else float(1.0 / np.sqrt(info))


def oracle_shape_z(tokens, n_heads: int, curve: AggregateCurve, criterion: float) -> float:
    """The rise's shape against the noise: the distance ``min_c sqrt(sum_i (n (p_i - q_i(c)))^2 / v_i)``
    between the expected counts of the rise ``p`` and those of the nearest rise ``q(c)`` of 10-90 width
    ``criterion`` (same floor and ceiling, midpoint ``c``) at the grid's positive revisions, ``v_i``
    the counts' variance (at least a quarter of a head squared): what a test of sharp against gradual
    that knew everything else would see. Below :data:`DETECTABLE_Z` the noise hides the shape, as
    :func:`oracle_z` says of a change, and the truth accepts ``unresolved`` (a 5 %-level test that
    knew the rest would have power 0.9 from about 2.9)."""
    tokens = np.asarray(tokens, float)
    x = np.log10(tokens[tokens > 0])
    p = curve.rise(10**x)
    v = np.maximum(curve.dispersion * n_heads * p * (1.0 - p), 0.25)

    def z(c: np.ndarray) -> np.ndarray:
        q = curve.floor + (curve.ceiling - curve.floor) * expit(2.0 * LN9 / criterion * (x[None, :] - c[:, None]))
        return np.sqrt(np.sum((n_heads * (p[None, :] - q)) ** 2 / v[None, :], axis=1))

    x50 = float(np.log10(curve.t50))
    coarse = np.linspace(x50 - 2.0, x50 + 2.0, 801)
    best = coarse[int(np.argmin(z(coarse)))]
    return float(np.min(z(np.linspace(best - 0.01, best + 0.01, 201))))


def oracle_median_se(spread_decades: float, n_switch: int) -> float:
    """The standard error of log10 t50 of ``n_switch`` followed heads whose switch-on times are drawn
    from ``Normal(log10 t50, spread_decades)``: the spread of their median, ``sqrt(pi / 2) spread /
    sqrt(n)`` (the sample median's asymptotic standard error; over the exact one by 7 % at three heads,
    1 % at twenty). Which heads a class has is itself measured (a flickering head may settle by chance,
    a switched head drop out, a threshold pass one and not its neighbour), so the analysis resamples the
    heads (:mod:`stats.head_times`) and is held to gaps of at least :data:`DETECTABLE_Z` of these
    (:func:`stats.space_scores.pair_bins`): three heads over a gradual rise place their median no better
    than this, however fine the grid."""
    return float(np.sqrt(np.pi / 2) * spread_decades / np.sqrt(max(n_switch, 1)))


def _flat_truth(criterion: float) -> StudyTruth:
    return StudyTruth(float("nan"), None, 0.0, "flat", False, criterion)


def sample_study(rng: np.random.Generator, space: StudySpace = StudySpace(),
                 criterion: float = DEFAULT_CRITERION) -> SampledStudy:
    """One study drawn from ``space`` (module docstring), its truth judged by ``criterion``."""
    kind = str(rng.choice(space.grid_kinds))
    m = _log_uniform_int(rng, *space.revisions, 1.5)
    tokens = sample_grid(kind, m, rng, 1.0 if kind == "pythia" and rng.random() < 0.7 else space.p_step0)
    x = np.log10(tokens[tokens > 0])
    n_heads = _log_uniform_int(rng, *space.n_heads)
    regime = str(rng.choice(space.regimes))
    flat = rng.random() < space.p_flat
    n_switch = 0 if flat else _n_switch(rng, space, n_heads)
    x50 = sample_position(x, rng, space.positions)
    width = _log_uniform(rng, *space.width_decades)
    decline_at = None
    if not flat and rng.random() < space.p_decline and x50 + width + 0.1 < x[-1]:
        decline_at = float(rng.uniform(x50 + width, x[-1]))
    return _study(kind=kind, tokens=tokens, x=x, regime=regime, n_heads=n_heads, n_switch=n_switch, x50=x50,
                  width=width, decline_at=decline_at, rng=rng, criterion=criterion)


def _n_switch(rng, space: StudySpace, n_heads: int) -> int:
    """Switching heads: log-uniform over ``space.n_switch``, at most ``max_switch_share`` of ``n_heads`` (3 at least)."""
    return _log_uniform_int(rng, space.n_switch[0], max(min(space.n_switch[1], int(space.max_switch_share * n_heads)), 3))


def _study(*, kind, tokens, x, regime, n_heads, n_switch, x50, width, decline_at, rng, criterion,
           switch=None) -> SampledStudy:
    """The :class:`SampledStudy` of the drawn factors (``switch``: followed heads' switch-on times, fixed)."""
    factors = {"grid": kind, "revisions": len(x), "step0": bool(tokens[0] == 0), "regime": regime, "n_heads": n_heads,
               "n_switch": n_switch, "flat": n_switch == 0, "width_drawn": width, "decline": decline_at is not None}
    if regime == "identity":
        sim, truth, switch = _identity_study(tokens, x, n_heads, n_switch, x50, width, decline_at, rng, criterion, switch)
    else:
        sim, truth, switch = _aggregate_study(tokens, x, n_heads, n_switch, x50, width, decline_at, rng, criterion)
    factors["position"] = truth.position
    return SampledStudy(factors, sim, truth, switch)


def _background(n_heads: int, n_switch: int, rng) -> dict:
    """Always-on, flickering and dropout heads of an identity study (with the ``n_switch`` switching
    heads, at most ``n_heads``)."""
    n_flicker = 0 if rng.random() < 0.4 else int(rng.integers(1, 7))
    n_always = min(int(rng.integers(0, max(n_heads // 10, 1) + 1)), max(n_heads - n_switch - n_flicker, 0))
    return dict(n_always=n_always, n_flicker=n_flicker, flicker_p=float(rng.uniform(0.1, 0.5)),
                dropout=0.0 if rng.random() < 0.5 else float(rng.uniform(0.0, 0.05)))


def _identity_study(tokens, x, n_heads, n_switch, x50, width, decline_at, rng, criterion, switch=None):
    """Followed heads: switch-on times log10 ~ Normal(x50, width / 2.563) (or ``switch``, whose median is
    then the true t50); the truth from the heads' own (realised) switch-on times, with the oracle z of
    followed heads (noise: flicker and dropout), their background and the oracle standard error of their
    median (:func:`oracle_median_se`)."""
    pop = HeadPopulation(n_heads, n_switch, float(10**x50), width / NORMAL_WIDTH_PER_SD, **_background(n_heads, n_switch, rng))
    n_decline = int(n_switch * rng.uniform(0.3, 0.6)) if decline_at is not None else 0
    with np.errstate(divide="ignore"):
        sim = simulate_population(pop, tokens, rng, n_decline=n_decline,
                                  decline_t50=None if decline_at is None else 10**decline_at, switch_log10=switch)
    if n_switch == 0:
        return sim, _flat_truth(criterion), None
    x10, median, x90 = np.quantile(sim.switch_log10, [0.1, 0.5, 0.9])
    truth = _truth(x, x50 if switch is not None else median, x10, x90, n_decline > 0, criterion)
    on = (sim.switch_log10[None, :] <= x[:, None]).sum(1) * (1 - pop.dropout)
    noise = pop.n_flicker * pop.flicker_p * (1 - pop.flicker_p) + pop.dropout * (1 - pop.dropout) * (on + pop.n_always)
    return sim, dataclasses.replace(truth, z=oracle_z(on, noise), present_at_start=float(pop.n_always),
                                    t50_se=oracle_median_se(pop.spread_decades, n_switch)), sim.switch_log10


def _aggregate_study(tokens, x, n_heads, n_switch, x50, width, decline_at, rng, criterion):
    """Fresh (beta-)binomial draws around a logistic from a background floor (none half the time, else
    U(0, 5 %) of the heads) to floor + n_switch / n_heads."""
    floor = 0.0 if rng.random() < 0.5 else float(rng.uniform(0.0, 0.05))  # background heads
    dispersion = 1.0 if rng.random() < 0.5 else float(rng.uniform(1.5, 4.0))
    if n_switch == 0:
        curve = AggregateCurve("flat", floor=float(rng.uniform(0.0, 0.3)), dispersion=dispersion)
    else:
        ceiling = min(floor + n_switch / n_heads, 1.0)
        decline = {} if decline_at is None else dict(decline_to=floor + (ceiling - floor) * rng.uniform(0.4, 0.7),
                                                    decline_t50=float(10**decline_at), decline_width=0.3)
        curve = AggregateCurve("logistic", floor, ceiling, float(10**x50), width, dispersion, **decline)
    with np.errstate(divide="ignore"):
        sim = curve.simulate(tokens, np.full(len(tokens), n_heads), rng)
    if n_switch == 0:
        return sim, _flat_truth(criterion), None
    half = width / 2
    p = curve.rise(10**x)
    truth = _truth(x, x50, x50 - half, x50 + half, decline_at is not None, criterion)
    return sim, dataclasses.replace(truth, z=oracle_z(n_heads * p, dispersion * n_heads * p * (1 - p)),
                                    t50_se=oracle_t50_se(tokens, n_heads, curve),
                                    shape_z=oracle_shape_z(tokens, n_heads, curve, criterion)), None


def _pair_grid(rng, space: StudySpace, span: float):
    """A grid from ``space`` whose positive revisions span more than ``span`` decades (redrawn until one does)."""
    for _ in range(1000):
        kind = str(rng.choice(space.grid_kinds))
        tokens = sample_grid(kind, _log_uniform_int(rng, *space.revisions, 1.5), rng, space.p_step0)
        x = np.log10(tokens[tokens > 0])
        if x[-1] - x[0] > span:
            return kind, tokens, x
    raise ValueError(f"no grid of the space spans {span:.2f} decades")


def sample_pair(rng: np.random.Generator, ratio: float, space: StudySpace = StudySpace(),
                criterion: float = DEFAULT_CRITERION) -> tuple:
    """Two classes of one study (same grid, regime and heads; their own widths and switching heads)
    whose true t50s are ``ratio`` apart (late / early), both inside the grid's positive range:
    ``(early, late)`` :class:`SampledStudy`. For followed heads the realised switch-on times are
    shifted so that their medians are exactly the two t50s (the gap's estimand is these heads' own)."""
    gap = float(np.log10(ratio))
    kind, tokens, x = _pair_grid(rng, space, abs(gap) + 0.1)
    n_heads = _log_uniform_int(rng, *space.n_heads)
    regime = str(rng.choice(space.regimes))
    x_early = float(rng.uniform(x[0] + max(-gap, 0.0), x[-1] - max(gap, 0.0)))
    out = []
    for x50 in (x_early, x_early + gap):
        n_switch = _n_switch(rng, space, n_heads)
        width = _log_uniform(rng, *space.width_decades)
        switch = None
        if regime == "identity":
            switch = rng.normal(x50, width / NORMAL_WIDTH_PER_SD, n_switch)
            switch += x50 - np.median(switch)
        out.append(_study(kind=kind, tokens=tokens, x=x, regime=regime, n_heads=n_heads, n_switch=n_switch, x50=x50,
                          width=width, decline_at=None, rng=rng, criterion=criterion, switch=switch))
    return tuple(out)
