"""The whole analysis of a set of curves: fits, change points, verdicts, times, gaps,
milestones, threshold sensitivity, findings, PR lead, the reproduction of the
reference study and, for seed suites, the pooling across training runs
(:mod:`stats.pooling`), gathered into a :class:`StudyAnalysis` (``summary()``, ``tables()``).

With a per-head table the selectivity thresholds are applied first, at analysis time
(:func:`stats.heads.apply_thresholds`, ``analysis.thresholds``): every count, flag
and per-head finding below is at those thresholds.

Per curve (:func:`analyse_curve`): the four models with a shared dispersion
(:func:`stats.models.fit_all`); PELT change points; the ``none`` checks of the
verdict rule; then, for curves that change, a parametric bootstrap of the logistic
(times and their intervals) and the bootstrap step-vs-logistic test, and the
verdict (:mod:`stats.shape`). Random streams are spawned per curve from ``seed``,
so a curve's result does not depend on the order of the others.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from emergence.contract import INDUCTION_LOSS_METRIC, MEAN_FIRST_TOKEN_METRIC, mean_selectivity_metric
from stats.bootstrap import BootstrapResults
from stats.changepoint import ChangePoints, detect_changepoints
from stats.censoring import Censoring, censoring_from_fit, censoring_without_rise
from stats.config import AnalysisConfig, ShapeConfig, check_analysis
from stats.phases import CurvePhases, curve_phases
from stats.curves import Curve, TrackedResults
from stats.findings import circuit_convergence, class_layer_counts, layer_floor, layer_onset
from stats.heads import apply_thresholds, thresholds_dict
from stats.milestones import MilestoneRule, compute_milestones, milestone_gaps
from stats.hypotheses import TestResult, step_vs_logistic
from stats.models import Dispersion, fit_all
from stats.pooling import pool_seeds, pooled_table
from stats.pr_lead import pr_lead
from stats.errors import StatsError
from stats.sensitivity import Sensitivity, threshold_sensitivity
from stats.story import gap_story
from stats.shape import (ShapeVerdict, classify_shape, jump_evidence, jump_share, level_change_test, qualify_verdict,
                         sharp_or_gradual)
from stats.times import GapRatio, TransitionTimes, bootstrap_transition_times, bracket_times, censored_times, gap_ratio

#: Minimum revisions for any fit.
MIN_FIT_POINTS = 3


@dataclass
class CurveAnalysis:
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

    @property
    def censored(self) -> Optional[str]:
        return None if self.censoring is None else self.censoring.side

    @property
    def model(self):
        return self.curve.model

    @property
    def klass(self):
        return self.curve.cls

    def to_dict(self) -> dict:
        c = self.curve
        ev = self.verdict.evidence
        t = self.times.to_dict() if self.times is not None else {}
        cp = self.changepoints.primary if self.changepoints is not None else None
        out = {
            "model": c.model,
            "class": c.cls,
            "pretraining_corpus": c.corpus,
            "shape": self.verdict.shape,
            "strength": ev.get("strength"),
            "continuous_disagrees": ev.get("continuous_disagrees"),
            "reason": self.verdict.reason,
            "censored": self.censored,
            "regime": self.regime,
            "decline": None if self.phases is None or self.phases.decline is None else self.phases.decline.to_dict(),
            "rise_revisions": None if self.phases is None else [str(c.revisions[0]), str(c.revisions[self.phases.rise_end - 1])],
            "n_points": len(c),
            "tokens": c.tokens.tolist(),
            "revisions": c.revisions.tolist(),
            "k": c.k.tolist(),
            "n": c.n.tolist(),
            "t50": t.get("t50"),
            "t50_ci": t.get("t50_ci"),
            "onset": t.get("onset"),
            "onset_ci": t.get("onset_ci"),
            "saturation": t.get("saturation"),
            "saturation_ci": t.get("saturation_ci"),
            "t50_bound": t.get("t50_bound"),
            "bracket_tokens": t.get("bracket_tokens"),
            "width_decades": t.get("width_decades"),
            "width_is_bound": t.get("width_is_bound"),
            "spacing_decades": t.get("spacing_decades"),
            "rise": ev.get("rise"),
            "max_jump": ev.get("max_jump"),
            "max_jump_share": ev.get("max_jump_share"),
            "max_jump_tokens": ev.get("max_jump_tokens"),
            "max_jump_revisions": ev.get("max_jump_revisions"),
            "max_jump_between": ev.get("max_jump_between"),
            "changepoint_tokens": None if cp is None else [cp.tokens_before, cp.tokens_after],
            "changepoint_revisions": None if cp is None else [cp.revision_before, cp.revision_after],
            "changepoints": None if self.changepoints is None else self.changepoints.to_dict(),
            "best_model": ev.get("best_model"),
            "aicc": ev.get("aicc"),
            "delta_aicc": ev.get("delta_aicc"),
            "rise_heads": ev.get("rise_heads"),
            "jump_heads": ev.get("jump_heads"),
            "max_jump_share_ci": ev.get("max_jump_share_ci"),
            "jump_spacing_decades": ev.get("jump_spacing_decades"),
            "p_change": ev.get("p_change"),
            "pure_step": ev.get("pure_step"),
            "p_step": None if self.step_test is None else self.step_test.p_value,
            "step_test": None if self.step_test is None else self.step_test.to_dict(),
            "dispersion": None if self.dispersion is None else self.dispersion.to_dict(),
            "fits": None if self.fits is None else {
                name: {"params": {k: float(v) for k, v in f.params.items()}, "loglik": f.loglik, "aicc": f.aicc}
                for name, f in self.fits.items()
            },
            "continuous": self.continuous,
            "notes": self.notes + (self.times.notes if self.times is not None else []),
        }
        return out


def _continuous_evidence(results: TrackedResults, curve: Curve, direction: Optional[float]) -> dict:
    """Largest-jump share of the class's continuous metric(s) at the curve's revisions (the rise):
    its mean selectivity (log10), and the mean first-token attention (BOS) or the induction loss
    (induction, which falls as the circuit forms)."""
    cont = results.continuous
    if cont is None or cont.empty:
        return {}
    metrics = [(mean_selectivity_metric(curve.cls), 1.0)]
    metrics += {"bos": [(MEAN_FIRST_TOKEN_METRIC, 1.0)], "induction": [(INDUCTION_LOSS_METRIC, -1.0)]}.get(curve.cls, [])
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
        js = jump_share(v, None if direction is None else sign * direction)
        out[metric] = {"scale": scale, "max_jump_share": js["max_jump_share"], "n_points": int(len(v))}
    return out


def analyse_curve(curve: Curve, config: Optional[AnalysisConfig] = None, rng: Optional[np.random.Generator] = None,
                  results: Optional[TrackedResults] = None) -> CurveAnalysis:
    """Analyse one curve (see module docstring); never raises on short or flat curves.

    With tracked ``results`` that know the model's registry (runs log ``registry_index``),
    the evidence also says how many registry revisions lie inside the largest jump's
    interval (``max_jump_between``; 0: resolved to adjacent checkpoints, as ``revision=refine``
    leaves it)."""
    analysis = _analyse_curve(curve, config, rng, results)
    ev = analysis.verdict.evidence
    if results is not None and ev.get("max_jump_revisions"):
        ev["max_jump_between"] = results.registry_between(curve.model, *ev["max_jump_revisions"])
    return analysis


def curve_regime(curve: Curve, shape: ShapeConfig) -> str:
    """The verdict rule's regime for ``curve``: ``analysis.shape.regime``, or with ``auto``
    ``identity`` where its counts follow the same heads, else ``aggregate``."""
    if shape.regime != "auto":
        return shape.regime
    return "identity" if curve.identity else "aggregate"


def _censored(curve: Curve, censor: Censoring, verdict: ShapeVerdict, cfg: AnalysisConfig, **parts) -> CurveAnalysis:
    """The analysis of a curve whose rise midpoint lies outside the range: verdict ``none`` with
    the censoring's reason, times the bound."""
    verdict = ShapeVerdict("none", censor.reason, verdict.evidence)
    if censor.side is None:
        return CurveAnalysis(curve, verdict, **parts)
    bound = float(curve.tokens[censor.bound_tokens_index])
    times = censored_times(censor.side, bound, cfg.n_boot, cfg.level)
    return CurveAnalysis(curve, verdict, times=times, censoring=censor, **parts)


def _short_rise(curve: Curve, rise: Curve, change: TestResult, cfg: AnalysisConfig, rng, **parts) -> CurveAnalysis:
    """A rise of fewer than ``min_points`` revisions before a decline: located by the
    checkpoints alone (where the count first passes half its rise), its verdict the
    share of its largest jump in the observed counts (too few points for a fit)."""
    f = rise.fraction
    j = max(int(np.argmax(f >= f[0] + (f.max() - f[0]) / 2 - 1e-12)), 1)
    times = bracket_times(rise.tokens[j - 1], rise.tokens[j], cfg.n_boot, rng, cfg.level)
    ev = jump_evidence(f, float(np.median(rise.n)), 1.0, "identity", level=cfg.level)
    i = ev.pop("_index")
    ev.update({"n_points": len(rise), "p_change": change.p_value,
               "max_jump_revisions": [rise.revisions[i], rise.revisions[i + 1]],
               "max_jump_tokens": [float(rise.tokens[i]), float(rise.tokens[i + 1])],
               "jump_spacing_decades": float(np.log10(rise.tokens[i + 1] / rise.tokens[i]))})
    verdict = sharp_or_gradual(ev, cfg.shape, cfg.level, None, cfg.alpha, "identity")
    return CurveAnalysis(curve, verdict, times=times, **parts)


def _analyse_curve(curve: Curve, config: Optional[AnalysisConfig], rng: Optional[np.random.Generator],
                   results: Optional[TrackedResults]) -> CurveAnalysis:
    cfg = AnalysisConfig() if config is None else config
    rng = np.random.default_rng(cfg.seed) if rng is None else rng
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
    change = level_change_test(curve.k, curve.n, sc.n_perm, rng, "unimodal" if phases.decline else "monotone")
    rise = curve.head(phases.rise_end)
    if phases.decline is not None:
        notes.append(f"decline: {phases.decline.describe()}; the fits, the verdict and the times are of the rise "
                     f"({rise.revisions[0]} .. {rise.revisions[-1]})")
    parts = dict(notes=notes, regime=regime, phases=phases)
    censor = censoring_without_rise(curve, phases, change.p_value, sc.min_rise_heads, cfg.alpha, regime,
                                    sc.background_share)
    if censor is not None:
        pre = classify_shape(rise.tokens, rise.k, rise.n, rise.revisions, fits=None, change=change, **rule)
        return _censored(curve, censor, pre, cfg, **parts)
    if len(rise) < sc.min_points:
        return _short_rise(curve, rise, change, cfg, rng, **parts)
    args = (rise.tokens, rise.k, rise.n, rise.revisions)
    fits, disp = fit_all(*args[:3], cfg.fit.overdispersion, cfg.fit.dispersion_level)
    cps = detect_changepoints(curve.tokens, curve.k, curve.n, curve.revisions, cfg.changepoint.penalty, disp.phi)
    pre = classify_shape(*args, fits=fits, change=change, **rule)
    params = fits["logistic"].params
    direction = float(params["ceiling"] - params["floor"])
    cont = _continuous_evidence(results, rise, direction) if results is not None else {}
    parts.update(fits=fits, dispersion=disp, changepoints=cps, continuous=cont)
    if pre.shape == "none":
        return CurveAnalysis(curve, pre, **parts)
    censor = censoring_from_fit(rise, float(params["log10_t50"]))
    if censor is not None:
        return _censored(curve, censor, pre, cfg, **parts)
    times, boot = bootstrap_transition_times(fits["logistic"], disp, cfg.n_boot, rng, cfg.level, sc.width_factor,
                                             cfg.fit.overdispersion)
    test_phi = disp.phi_raw if cfg.fit.overdispersion else 1.0
    test = step_vs_logistic(*args[:3], cfg.n_boot, rng, test_phi, fits, studentize=cfg.fit.overdispersion)
    verdict = classify_shape(*args, fits=fits, times=times, p_step=test.p_value, change=change, boot=boot, **rule)
    verdict = qualify_verdict(verdict, cont, sc.min_jump_share)
    return CurveAnalysis(curve, verdict, times=times, step_test=test, boot=boot, **parts)


@dataclass
class StudyAnalysis:
    """Everything the suite concludes from one set of curves."""

    results: TrackedResults
    config: AnalysisConfig
    curves: list
    gaps: list
    layer_floor: list
    layer_onset: list
    convergence: list
    pr_lead: list
    notes: list = field(default_factory=list)
    milestones: list = field(default_factory=list)
    milestone_gaps: list = field(default_factory=list)
    sensitivity: Optional[Sensitivity] = None
    #: :class:`stats.reference.Reproduction` when the reference study's models are analysed
    reproduction: object = None
    #: one :class:`stats.story.GapStory` per model with both gap classes
    stories: list = field(default_factory=list)
    #: one :class:`stats.pooling.PooledGap` per seed group (several training runs of one model)
    pooled: list = field(default_factory=list)

    def curve(self, model: str, klass: str) -> CurveAnalysis:
        for c in self.curves:
            if c.model == model and c.klass == klass:
                return c
        raise KeyError((model, klass))

    def gap(self, model: str) -> GapRatio:
        """The fitted gap ratio of ``model``."""
        for g in self.gaps:
            if g.model == model:
                return g
        raise KeyError(model)

    def milestone(self, model: str, name: str):
        for m in self.milestones:
            if m.model == model and m.name == name:
                return m
        raise KeyError((model, name))

    def milestone_gap(self, model: str):
        for g in self.milestone_gaps:
            if g.model == model:
                return g
        raise KeyError(model)

    def gap_dicts(self) -> list:
        """Every gap of ``summary.json``: the fitted ones, then the milestone ones."""
        return [g.to_dict() | {"definition": "fitted"} for g in self.gaps] + [g.to_dict() for g in self.milestone_gaps]

    @property
    def has_pr(self) -> bool:
        return self.results.has_pr()

    def summary(self) -> dict:
        """The content of ``summary.json`` (JSON-safe: NaN and inf become null)."""
        out = {
            "source": self.results.source,
            "notes": self.results.notes + self.notes,
            "thresholds": self.results.source.get("thresholds"),
            "reproduction": None if self.reproduction is None else self.reproduction.to_dict(),
            "stories": [st.to_dict() | {"warning": st.warning()} for st in self.stories],
            "curves": [c.to_dict() for c in self.curves],
            "gaps": self.gap_dicts(),
            "pooled_gaps": [g.to_dict() for g in self.pooled],
            "milestones": [m.to_dict() for m in self.milestones],
            "sensitivity": None if self.sensitivity is None else self.sensitivity.to_dict(),
            "findings": {
                "layer_floor": [f.to_dict() for f in self.layer_floor],
                "layer_onset": [f.to_dict() for f in self.layer_onset],
                "convergence": [f.to_dict() for f in self.convergence],
            },
            "pr_lead": [p.to_dict() for p in self.pr_lead],
            "has_pr_data": self.has_pr,
        }
        return json_safe(out)

    def tables(self) -> dict:
        """Tidy tables for the CSV outputs."""
        rows = []
        for c in self.curves:
            d = c.to_dict()
            rows.append({k: d[k] for k in ("model", "class", "pretraining_corpus", "shape", "reason", "n_points", "t50",
                                              "onset", "saturation", "t50_bound", "width_decades", "width_is_bound",
                                              "spacing_decades", "rise", "max_jump", "max_jump_share", "best_model", "p_step")}
                        | {"t50_lo": _ci(d["t50_ci"], 0), "t50_hi": _ci(d["t50_ci"], 1),
                           "changepoint_before": _ci(d["changepoint_tokens"], 0), "changepoint_after": _ci(d["changepoint_tokens"], 1),
                           "dispersion": None if c.dispersion is None else c.dispersion.phi})
        fit_rows = []
        for c in self.curves:
            for name, f in (c.fits or {}).items():
                ci = f.conf_int()
                for p, v in f.params.items():
                    fit_rows.append({"model": c.model, "class": c.klass, "fit": name, "parameter": p, "estimate": float(v),
                                     "lower": float(ci.loc[p, "lower"]), "upper": float(ci.loc[p, "upper"]),
                                     "loglik": f.loglik, "aicc": f.aicc, "dispersion": f.dispersion})
        conv = [c.table.assign(model=c.model, threshold=c.threshold) for c in self.convergence]
        pr = [pd.DataFrame([h.to_dict() for h in p.heads]).assign(model=p.model) for p in self.pr_lead if p.heads]
        sens = self.sensitivity.to_dict()["rows"] if self.sensitivity is not None else []
        gaps = self.gap_dicts()
        return {
            "data": self.results.curves,
            "milestones": pd.DataFrame([m.to_dict() for m in self.milestones]).drop(columns=["bracket_tokens"], errors="ignore"),
            "sensitivity": pd.DataFrame(sens).drop(columns=["t50_ci", "gap_ratio_ci"], errors="ignore").assign(
                t50_lo=[_ci(r["t50_ci"], 0) for r in sens], t50_hi=[_ci(r["t50_ci"], 1) for r in sens],
                gap_lo=[_ci(r["gap_ratio_ci"], 0) for r in sens], gap_hi=[_ci(r["gap_ratio_ci"], 1) for r in sens]),
            "reproduction": pd.DataFrame(self.reproduction.rows if self.reproduction is not None else []),
            "pooled_gaps": pooled_table(self.pooled),
            "curves": pd.DataFrame(rows),
            "fits": pd.DataFrame(fit_rows),
            "gaps": pd.DataFrame(gaps).drop(columns=["notes"], errors="ignore") if gaps else pd.DataFrame(),
            "layer_floor": pd.DataFrame([f.to_dict() for f in self.layer_floor]),
            "layer_onset": pd.DataFrame([{"model": f.model, "layer": l, "onset_tokens": t}
                                         for f in self.layer_onset for l, t in f.onset.items()]),
            "convergence": pd.concat(conv, ignore_index=True) if conv else pd.DataFrame(),
            "pr_lead": pd.concat(pr, ignore_index=True) if pr else pd.DataFrame(),
        }


def _ci(v, i):
    return None if v is None else v[i]


def json_safe(obj):
    """Recursively turn numpy scalars into Python ones and NaN/inf into None."""
    if isinstance(obj, dict):
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return [json_safe(v) for v in obj.tolist()]
    if isinstance(obj, (np.bool_,)):
        return bool(obj)
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        v = float(obj)
        return v if math.isfinite(v) else None
    return obj


def fitted_gap(model: str, late: CurveAnalysis, early: CurveAnalysis, cfg: AnalysisConfig) -> GapRatio:
    """Fitted gap ratio t50(late) / t(early) of two curve analyses (:func:`stats.times.gap_ratio`);
    an early class with no transition but heads from the first revision counts as
    already formed (a lower-bound ratio); no transition otherwise: a NaN ratio with a note."""
    tc = cfg.times
    early_times = early.times
    if late.times is None or early_times is None:
        missing = [a.klass for a in (late, early) if a.times is None]
        nan = float("nan")
        return GapRatio(model, tc.late_class, tc.early_class, tc.formation, nan, nan, nan, [nan, nan], nan, cfg.level,
                        [f"no transition in {', '.join(missing)} (shape none): no ratio"])
    return gap_ratio(model, late.times, early_times, tc.formation, tc.late_class, tc.early_class, cfg.level)


def model_stories(models, by_key: dict, gaps: list, milestone_gaps: list, cfg: AnalysisConfig) -> list:
    """The :class:`stats.story.GapStory` of every model with a fitted gap."""
    tc = cfg.times
    fitted = {g.model: g for g in gaps}
    miles = {g.model: g for g in milestone_gaps}
    return [gap_story(m, fitted[m], miles.get(m), by_key.get((m, tc.late_class)), by_key.get((m, tc.early_class)),
                      cfg.shape.min_points, cfg.shape.min_rise_heads) for m in models if m in fitted]


def analyse(results: TrackedResults, config: Optional[AnalysisConfig] = None) -> StudyAnalysis:
    """Analyse every curve of ``results`` (re-counted at ``config.thresholds`` when it
    has a per-head table) and the cross-curve findings."""
    cfg = AnalysisConfig() if config is None else config
    check_analysis(cfg)
    thresholds = thresholds_dict(cfg.thresholds)
    rules = [MilestoneRule.from_config(r) for r in cfg.milestones.rules]
    names = [r.name for r in rules]
    for key in ("gap_late", "gap_early"):
        name = getattr(cfg.milestones, key)
        if name not in names:
            raise StatsError(f"analysis.milestones.{key}={name!r}: not a milestone rule name; valid: {names}")
    results = apply_thresholds(results, thresholds)
    curve_list = list(results.iter_curves())
    seeds = np.random.SeedSequence(cfg.seed).spawn(len(curve_list) + 2)
    analyses = []
    bar = tqdm(curve_list, desc="curves", disable=not cfg.progress, leave=False)
    for curve, seed in zip(bar, seeds):
        bar.set_postfix_str(f"{curve.model}/{curve.cls}")
        analyses.append(analyse_curve(curve, cfg, np.random.default_rng(seed), results))
    tc = cfg.times
    gaps = []
    by_key = {(a.model, a.klass): a for a in analyses}
    for model in results.models:
        late, early = by_key.get((model, tc.late_class)), by_key.get((model, tc.early_class))
        if late is None or early is None:
            continue
        gaps.append(fitted_gap(model, late, early, cfg))
    milestones = compute_milestones(results, rules, thresholds)
    m_gaps = milestone_gaps(milestones, cfg.milestones.gap_late, cfg.milestones.gap_early)
    sensitivity = threshold_sensitivity(results, by_key, cfg, seeds[len(curve_list) + 1])
    fc = cfg.findings
    rng = np.random.default_rng(seeds[len(curve_list)])
    floors, onsets, convs, leads = [], [], [], []
    for model in results.models:
        counts = class_layer_counts(results, fc.floor_class, model)
        if not counts.empty:
            f = layer_floor(counts, model, fc.floor_class, fc.floor_layers, fc.floor_rate, cfg.alpha, results.heads)
            if f is not None:
                floors.append(f)
        counts = class_layer_counts(results, fc.onset_class, model)
        if not counts.empty:
            o = layer_onset(counts, model, fc.onset_class, fc.onset_min_count, fc.floor_layers, fc.n_perm, rng,
                            persist=fc.onset_persist, just_above_floor=fc.just_above_floor, alpha=cfg.alpha)
            if o is not None:
                onsets.append(o)
        if results.heads is not None:
            main = thresholds.get(fc.convergence_class)
            for thr in sorted({float(t) for t in fc.convergence_thresholds} | ({float(main)} if main else set())):
                c = circuit_convergence(results.heads, model, fc.convergence_class, fc.recall_level, thr)
                if c is not None:
                    convs.append(c)
            pc = cfg.pr_lead
            p = pr_lead(results.heads, model, pc.column, pc.k_mad, pc.induction_class, pc.top_heads, pc.persist)
            if p is not None:
                leads.append(p)
    notes = []
    column = cfg.pr_lead.column
    if results.heads is not None and (column not in results.heads.columns or not results.heads[column].notna().any()):
        notes.append(f"no PR data: the per-head table has no `{column}` values (analysis.pr_lead.column); "
                     "the PR-lead analysis is empty")
    elif not results.has_pr():
        notes.append("no PR data: the runs have no `pr` column in heads.csv; the PR-lead analysis is empty")
    if results.heads is None:
        notes.append("no per-head table: circuit convergence, PR lead and threshold sensitivity not computed")
    stories = model_stories(results.models, by_key, gaps, m_gaps, cfg)
    pooled = pool_seeds(results, by_key, gaps, cfg)
    study = StudyAnalysis(results, cfg, analyses, gaps, floors, onsets, convs, leads, notes, milestones, m_gaps,
                          sensitivity if sensitivity.rows else None, stories=stories, pooled=pooled)
    from stats.reference import reproduce

    study.reproduction = reproduce(study)
    return study
