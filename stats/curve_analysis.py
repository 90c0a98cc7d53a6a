"""The per-curve stage: fits, change points, the verdict and the times of one curve.

Per curve (:func:`analyse_curve`): the four models with a shared dispersion
(:func:`stats.models.fit_all`); PELT change points; the ``none`` checks of the
verdict rule; then, for curves that change, a parametric bootstrap of the logistic
(times and their intervals; for followed heads, the heads' own switch-on times,
:mod:`stats.head_times`) and the bootstrap step-vs-logistic test, and the
verdict (:mod:`stats.shape`). A curve that rises and falls again is analysed on its
rise (:mod:`stats.phases`); a rise whose midpoint lies outside the screened range is
a bound (:mod:`stats.censoring`). The result is a :class:`CurveAnalysis`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
from scipy.stats import poisson

from emergence.common.contract import INDUCTION_LOSS_METRIC, MEAN_FIRST_TOKEN_METRIC, mean_selectivity_metric
from stats.bootstrap import BootstrapResults
from stats.censoring import Censoring, censoring_from_fit, censoring_from_heads, censoring_without_rise
from stats.changepoint import ChangePoints, detect_changepoints
from stats.change import change_test, describe_single, single_revision
from stats.config import DEFAULTS, AnalysisConfig, ShapeConfig, check_options
from stats.head_times import switch_intervals, with_head_times
from stats.hypotheses import TestResult, step_vs_logistic
from stats.models import Dispersion, fit_all
from stats.phases import CurvePhases, curve_phases
from stats.results import Results, written
from stats.shape import ShapeVerdict, classify_shape, jump_evidence, jump_location, qualify_verdict, sharp_or_gradual
from stats.switching import switched_counts
from stats.width import grid_bounds
from stats.times import TransitionTimes, bootstrap_transition_times, bracket_times, censored_times
from stats.tracked import Curve, TrackedResults

#: Minimum revisions for any fit.
MIN_FIT_POINTS = 3

#: The written record of a curve (``summary.json`` ``curves[]``), its entries in order. Each is
#: read by name from the analysis's parts (:meth:`CurveAnalysis.entries`), never computed here.
RECORD = ("model", "class", "pretraining_corpus", "shape", "resolution", "continuous_disagrees", "reason", "censored",
          "regime", "decline", "rise_revisions", "n_points", "tokens", "revisions", "k", "n", "t50", "t50_ci", "onset",
          "onset_ci", "saturation", "saturation_ci", "t50_bound", "bracket_tokens", "width_decades", "width_is_bound",
          "width_ci", "width_lower", "width_upper", "width_grid", "sharp_width_decades", "spacing_decades", "rise",
          "max_jump", "max_jump_share", "max_jump_tokens", "max_jump_revisions", "max_jump_between",
          "changepoint_tokens", "changepoint_revisions", "changepoints", "best_model", "aicc", "delta_aicc",
          "rise_heads", "jump_heads", "max_jump_share_ci", "jump_spacing_decades", "p_change", "change_test",
          "single_revision", "pure_step", "p_step", "step_test", "dispersion", "fits", "continuous", "notes")


@dataclass
class CurveAnalysis(Results):
    """The per-curve stage's result: the curve, its verdict and its evidence, fits, times and tests."""

    curve: Curve
    verdict: ShapeVerdict
    fits: Optional[dict] = None
    dispersion: Optional[Dispersion] = None
    changepoints: Optional[ChangePoints] = None
    times: Optional[TransitionTimes] = None
    step_test: Optional[TestResult] = None
    boot: Optional[BootstrapResults] = None
    continuous: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)
    #: ``identity`` or ``aggregate`` (:func:`curve_regime`)
    regime: str = "aggregate"
    #: the rise, peak and decline (:mod:`stats.phases`)
    phases: Optional[CurvePhases] = None
    #: set when the rise's midpoint lies outside the screened range (:mod:`stats.censoring`)
    censoring: Optional[Censoring] = None
    #: the test of change (:mod:`stats.change`)
    change: Optional[TestResult] = None

    @property
    def censored(self) -> Optional[str]:
        return None if self.censoring is None else self.censoring.side

    @property
    def model(self) -> str:
        return self.curve.model

    @property
    def head_class(self) -> str:
        return self.curve.head_class

    def entries(self) -> dict:
        """Every entry the record can show, by name: the verdict's evidence, the times, the curve's
        record, then the analysis's own (each part overriding the ones before it)."""
        c, cps = self.curve, self.changepoints
        rise_end = None if self.phases is None else self.phases.rise_end
        own = {
            "shape": self.verdict.shape, "reason": self.verdict.reason, "censored": self.censored,
            "regime": self.regime, "decline": None if self.phases is None else written(self.phases.decline),
            "rise_revisions": None if rise_end is None else [str(c.revisions[0]), str(c.revisions[rise_end - 1])],
            "n_points": len(c),
            "changepoint_tokens": None if cps is None else cps.primary_tokens,
            "changepoint_revisions": None if cps is None else cps.primary_revisions,
            "changepoints": written(self.changepoints), "p_step": None if self.step_test is None else self.step_test.p_value,
            "change_test": written(self.change), "single_revision": single_revision(self.change),
            "step_test": written(self.step_test), "dispersion": written(self.dispersion),
            "fits": None if self.fits is None else {name: f.to_dict() for name, f in self.fits.items()},
            "continuous": self.continuous, "notes": self.notes + (self.times.notes if self.times is not None else []),
        }
        times = {} if self.times is None else self.times.to_dict()
        return {**self.verdict.evidence, **times, **c.to_dict(), **own}

    def to_dict(self) -> dict:
        """The written record (:data:`RECORD`); an entry the analysis does not have is None."""
        entries = self.entries()
        return {key: entries.get(key) for key in RECORD}

    @property
    def verdict_text(self) -> str:
        """The verdict in words, as the report and the figures print it (its wording: stats/shape.py)."""
        return self.verdict.shape

    def summary(self) -> str:
        when = "" if self.times is None else f"; {self.times.summary()}"
        return f"{self.model} / {self.head_class}: {self.verdict_text} - {self.verdict.reason}{when}"


def continuous_evidence(results: TrackedResults, curve: Curve, direction: Optional[float],
                        criterion: float = DEFAULTS.shape.sharp_width_decades) -> dict:
    """The shape each of the class's continuous metrics reads over the rise (its mean selectivity in
    log10, and the mean first-token attention for BOS or the falling induction loss for induction)
    by the grid's bounds of its 10-90 width (:func:`stats.width.grid_bounds`) against ``criterion``."""
    cont = results.continuous
    if cont is None or cont.empty:
        return {}
    metrics = [(mean_selectivity_metric(curve.head_class), 1.0)]
    metrics += {"bos": [(MEAN_FIRST_TOKEN_METRIC, 1.0)],
                "induction": [(INDUCTION_LOSS_METRIC, -1.0)]}.get(curve.head_class, [])
    revs = set(map(str, curve.revisions))
    out = {}
    for metric, sign in metrics:
        d = cont[(cont["model"] == curve.model) & (cont["metric"] == metric) & (cont["tokens"] > 0)
                 & cont["revision"].astype(str).isin(revs)].sort_values("tokens")
        if len(d) < 2:
            continue
        v = d["value"].to_numpy(float)
        scale = "value"
        if metric.startswith("mean_selectivity") and np.all(v > 0):
            v, scale = np.log10(v), "log10"
        grid = grid_bounds(d["tokens"].to_numpy(float), v, sign * (1.0 if direction is None else np.sign(direction) or 1.0))
        if grid is None:
            continue
        reads = "sharp" if grid["upper"] <= criterion else "gradual" if grid["lower"] > criterion else "unresolved"
        out[metric] = {"scale": scale, "width_grid": [grid["lower"], grid["upper"]], "reads": reads,
                       "n_points": int(len(v))}
    return out


def analyse_curve(curve: Curve, config: Optional[AnalysisConfig] = None, rng: Optional[np.random.Generator] = None,
                  results: Optional[TrackedResults] = None) -> CurveAnalysis:
    """Analyse one curve (module docstring); never raises on short or flat curves (a verdict rule
    value its schema refuses is one :class:`~stats.errors.StatsError` line). With ``results`` that
    know the model's revisions (``registry_index``), ``max_jump_between`` counts the known revisions
    inside the largest jump's interval (0: adjacent checkpoints, as ``revision=refine`` leaves it)."""
    cfg = AnalysisConfig() if config is None else config
    check_options(cfg.shape, "analysis.shape.")
    rng = np.random.default_rng(cfg.seed) if rng is None else rng
    analysis = _analyse(curve, cfg, rng, results)
    ev = analysis.verdict.evidence
    if results is not None and ev.get("max_jump_revisions"):
        ev["max_jump_between"] = results.known_between(curve.model, *ev["max_jump_revisions"])
    return analysis


def curve_regime(curve: Curve, shape: ShapeConfig) -> str:
    """The verdict rule's regime for ``curve``: ``analysis.shape.regime``, or with ``auto``
    ``identity`` where its counts follow the same heads, else ``aggregate``."""
    return curve.regime if shape.regime == "auto" else shape.regime


def _censored(curve: Curve, censor: Censoring, verdict: ShapeVerdict, cfg: AnalysisConfig, **parts) -> CurveAnalysis:
    """The analysis of a curve whose rise midpoint lies outside the range: verdict ``none`` with
    the censoring's reason, times the bound."""
    verdict = ShapeVerdict("none", censor.reason, verdict.evidence)
    if censor.side is None:
        return CurveAnalysis(curve, verdict, **parts)
    bound = censor.bound(curve.tokens)
    note = (None if censor.bound_tokens is None else f"t50 {'after' if censor.side == 'right' else 'at or before'} "
            f"{bound:.3g} tokens: a {'lower' if censor.side == 'right' else 'upper'} bound")
    times = censored_times(censor.side, bound, cfg.n_boot, cfg.level, note)
    return CurveAnalysis(curve, verdict, times=times, censoring=censor, **parts)


def _switched(curve: Curve, stop: int) -> Optional[np.ndarray]:
    """The count of the curve's heads switched on (:func:`stats.switching.switched_counts` over the whole
    curve, heads on before training left out) at its first ``stop`` revisions; None without flags."""
    return None if curve.flags is None else switched_counts(curve.trained_flags)[:stop]


def _rise_end_unseen(curve: Curve, rise: Curve, switched: Optional[np.ndarray],
                     share: float = 0.1) -> Optional[str]:
    """Which end of the followed heads' rise (``switched``: :func:`_switched`) the range does not show
    (``"start"``, ``"end"``, ``"both"``), or None; then the heads bound the width from below only
    (:func:`stats.shape.sharp_or_gradual`). The start is unseen where step 0 is known and heads off
    then and on at the first revision hold at least ``share`` of the heads switched by the rise's end
    (its 10 % point may lie before the range; without step 0 such heads are the rise's floor). The
    end is unseen where no decline follows and heads still arrive at the last revision
    (:func:`_still_arriving`)."""
    c = switched
    if c is None or c.size < 2 or c[-1] <= 0:
        return None
    start = curve.flags_at_init is not None and c[0] >= share * c[-1]
    end = len(rise) == len(curve) and _still_arriving(curve, c)
    return {(True, True): "both", (True, False): "start", (False, True): "end"}.get((start, end))


def _heads_seen_whole(rise: Curve, unseen: Optional[str], side: str) -> bool:
    """Whether the followed heads show the whole rise inside the range, so that its midpoint (the
    median head's switch-on, :mod:`stats.head_times`) lies inside whatever a logistic through the
    counts puts on ``side`` of it: at least :data:`~stats.head_times.MIN_HEADS` heads switch on
    inside the range, none still arriving at its end (``unseen``); against ``left``, step 0 known
    besides (else heads on from the first revision may be on by construction, and the logistic's
    reading stands; most heads on before the range: :func:`stats.censoring.censoring_from_heads`).
    Why: the logistic takes the first and last counts for floor and ceiling, and with few heads
    beside always-on ones it put a rise seen whole (three heads switching two revisions before the
    last) after the range."""
    if rise.flags is None or unseen in ("end", "both") or switch_intervals(rise.flags, rise.tokens) is None:
        return False
    return side == "right" or rise.flags_at_init is not None


def _still_arriving(curve: Curve, switched: np.ndarray, share: float = 0.25, level: float = 0.95) -> bool:
    """Heads still switch on at the curve's last revision, at a rate in log10 tokens of at least
    ``share`` of the rise's mean rate (``switched``: the heads switched on by each revision).

    The arrivals are the heads on at the last revision for the first time (heads on before training
    left out). Flicker (heads on for the first time at an earlier revision and off at the next,
    ``lam`` a revision on average) is what arrives under no rise: the arrivals must exceed its
    Poisson ``level`` quantile, and those beyond ``lam`` per decade of the last interval must come
    at ``share`` or more of the switched heads' mean rate since just before the first of them.
    Rates, not counts, so that a denser grid reads the same rise as under way (a logistic rise
    arrives at a quarter of its mean 10-90 rate near its 95 % point). The last heads' switch-on
    cannot be confirmed (:mod:`stats.switching` needs two revisions), but shows the rise going on."""
    if curve.flags is None or len(curve) < 3:
        return False
    f = curve.trained_flags
    ever = np.logical_or.accumulate(f, axis=0)
    first = f[1:] & ~ever[:-1]  # on for the first time at revisions 1 .. m-1
    lam = float(np.mean((first[:-1] & ~f[2:]).sum(1)))
    arrived = float(first[-1].sum())
    new = arrived - lam
    if arrived <= poisson.ppf(level, lam) or new <= 0:
        return False
    x = np.log10(np.maximum(np.asarray(curve.tokens, float), 1.0))
    positive = np.flatnonzero(np.asarray(curve.tokens) > 0)
    start = max(int(np.argmax(switched > 0)) - 1, int(positive[0]) if positive.size else 0)
    span, last = x[-1] - x[start], x[-1] - x[-2]
    if span <= 0 or last <= 0:
        return True
    return new / last >= share * (switched[-1] + new) / span


def _short_rise(curve: Curve, rise: Curve, cfg: AnalysisConfig, rng, change: TestResult, **parts) -> CurveAnalysis:
    """A rise of fewer than ``min_points`` revisions before a decline: located by the
    checkpoints alone (where the count first passes half its rise), its verdict the width
    rule on the grid's bounds (too few points for a fit)."""
    f = rise.fraction
    j = max(int(np.argmax(f >= f[0] + (f.max() - f[0]) / 2 - 1e-12)), 1)
    times = bracket_times(rise.tokens[j - 1], rise.tokens[j], cfg.n_boot, rng, cfg.level)
    ev = jump_evidence(f, float(np.median(rise.n)), 1.0, "identity", level=cfg.level)
    ev.update({"n_points": len(rise), "p_change": change.p_value,
               **jump_location(rise.tokens, rise.revisions, ev.pop("_index"))})
    switched = _switched(curve, len(rise))
    verdict = sharp_or_gradual(ev, cfg.shape, rise.tokens, rise.k, rise.n, rise.revisions, "identity",
                               switched=switched, unseen=_rise_end_unseen(curve, rise, switched))
    return CurveAnalysis(curve, verdict, times=times, change=change, **parts)


def _change(curve: Curve, regime: str, shape: str, cfg: AnalysisConfig, rng) -> tuple:
    """The change test of the curve (:mod:`stats.change`: head-wise with the heads' flags, else the
    quasi-likelihood bootstrap) and, when its change rests on one revision, the test as the
    verdict reads it (H0 kept: the p-value without that revision) and why."""
    flags = curve.flags if regime == "identity" else None
    change = change_test(curve.k, curve.n, curve.revisions, flags, shape, cfg.shape.n_perm, rng, cfg.alpha)
    if single_revision(change) is None:
        return change, change, None
    why = describe_single(change, curve.k, curve.n, curve.revisions)
    return change, dataclasses.replace(change, p_value=change.details["p_without"]), why


def _analyse(curve: Curve, cfg: AnalysisConfig, rng: np.random.Generator,
             results: Optional[TrackedResults]) -> CurveAnalysis:
    """The steps of :func:`analyse_curve`: too short, the rise and its censoring, a short rise, or the fits."""
    sc = cfg.shape
    regime = curve_regime(curve, sc)
    notes = [f"left out of log10-token fits: {d}" for d in curve.dropped]
    rule = dict(config=sc, alpha=cfg.alpha, level=cfg.level, regime=regime)
    if len(curve) < max(MIN_FIT_POINTS, sc.min_points):
        verdict = classify_shape(curve.tokens, curve.k, curve.n, curve.revisions, fits=None, **rule)
        if verdict.shape != "none":  # min_points below MIN_FIT_POINTS
            verdict = ShapeVerdict("none", f"too short: {len(curve)} revisions < {MIN_FIT_POINTS} needed for a fit", verdict.evidence)
        return CurveAnalysis(curve, verdict, notes=notes, regime=regime)
    phases = curve_phases(curve, sc.min_rise_heads, sc.min_decline_share, cfg.alpha, sc.n_perm, rng, regime)
    test, change, single = _change(curve, regime, "unimodal" if phases.decline else "monotone", cfg, rng)
    rise = curve.head(phases.rise_end)
    if phases.decline is not None:
        notes.append(f"decline: {phases.decline.describe()}; the fits, the verdict and the times are of the rise "
                     f"({rise.revisions[0]} .. {rise.revisions[-1]})")
    if test.details.get("note"):
        notes.append(test.details["note"])
    parts = dict(notes=notes, regime=regime, phases=phases, change=test)
    if single is not None and test.details["single_at"] == "last":
        # a change seen at the last revision alone, the start of a rise or an outlier: t50 > r_{m-1}, a lower bound
        pre = classify_shape(rise.tokens, rise.k, rise.n, rise.revisions, fits=None, change=change, **rule)
        censor = Censoring("right", f"{single}; t50 > {curve.revisions[-2]} (the revision before the last)",
                           bound_tokens=float(curve.tokens[-2]))
        return _censored(curve, censor, pre, cfg, **parts)
    censor = censoring_without_rise(curve, phases, change, sc.min_rise_heads, cfg.alpha, regime, sc.background_share)
    if censor is not None:
        pre = classify_shape(rise.tokens, rise.k, rise.n, rise.revisions, fits=None, change=change, **rule)
        analysis = _censored(curve, censor, pre, cfg, **parts)
    elif len(rise) < sc.min_points:
        return _short_rise(curve, rise, cfg, rng, **parts)
    else:
        analysis = _fitted(curve, rise, change, cfg, rng, results, rule, parts)
    if single is not None and analysis.verdict.shape == "none":
        analysis.verdict = ShapeVerdict("none", f"{single}; {analysis.verdict.reason}", analysis.verdict.evidence)
    return analysis


def _fitted(curve: Curve, rise: Curve, change: TestResult, cfg: AnalysisConfig, rng: np.random.Generator,
            results: Optional[TrackedResults], rule: dict, parts: dict) -> CurveAnalysis:
    """A rise long enough to fit: the four models, change points, the verdict's ``none`` checks,
    then (for a rise inside the range) the bootstrap times, the step test and the verdict."""
    args = (rise.tokens, rise.k, rise.n, rise.revisions)
    fits, disp = fit_all(*args[:3], cfg.fit.overdispersion, cfg.fit.dispersion_level)
    cps = detect_changepoints(curve.tokens, curve.k, curve.n, curve.revisions, cfg.changepoint.penalty, disp.phi)
    pre = classify_shape(*args, fits=fits, change=change, **rule)
    params = fits["logistic"].params
    direction = float(params["ceiling"] - params["floor"])
    cont = continuous_evidence(results, rise, direction, cfg.shape.sharp_width_decades) if results is not None else {}
    parts.update(fits=fits, dispersion=disp, changepoints=cps, continuous=cont)
    if pre.shape == "none":
        return CurveAnalysis(curve, pre, **parts)
    switched = _switched(curve, len(rise))
    unseen = _rise_end_unseen(curve, rise, switched)
    if rule["regime"] == "identity" and switched is not None and unseen not in ("end", "both"):
        censor = censoring_from_heads(rise, cfg.n_boot, rng, cfg.level)  # most heads switched on before the range
        if censor is not None:
            return _censored(curve, censor, pre, cfg, **parts)
    times, boot = bootstrap_transition_times(fits["logistic"], disp, cfg.n_boot, rng, cfg.level, cfg.shape.width_factor,
                                             cfg.fit.overdispersion)
    if rule["regime"] == "identity" and rise.flags is not None:  # followed heads: their own switch-on times
        # heads to come after the range, as many as the logistic's rise exceeds the switched heads by, only where the
        # heads show the rise going on at its end: where it has ended, the heads seen are the rise
        n_rise = float(params["ceiling"] - fits["logistic"].predict(rise.tokens[:1])[0]) * float(np.median(rise.n))
        times = with_head_times(times, rise.flags, rise.tokens, cfg.n_boot, rng, n_rise if unseen in ("end", "both") else 0.0)
    censor = censoring_from_fit(rise, float(params["log10_t50"]), times.draws_t50, cfg.level)
    if censor is not None and rule["regime"] == "identity" and _heads_seen_whole(rise, unseen, censor.side):
        parts["notes"].append(f"the logistic's midpoint lies {'before' if censor.side == 'left' else 'after'} the range, "
                              "but the rise's heads switched on inside it and none arrive at its end: their median "
                              "switch-on is the t50")
        censor = None
    if censor is not None:
        return _censored(curve, censor, pre, cfg, **parts)
    test_phi = disp.phi_raw if cfg.fit.overdispersion else 1.0
    test = step_vs_logistic(*args[:3], cfg.n_boot, rng, test_phi, fits, studentize=cfg.fit.overdispersion)
    verdict = classify_shape(*args, fits=fits, times=times, p_step=test.p_value, change=change, boot=boot,
                             switched=switched, unseen=unseen, rng=rng, **rule)
    verdict = qualify_verdict(verdict, cont)
    return CurveAnalysis(curve, verdict, times=times, step_test=test, boot=boot, **parts)
