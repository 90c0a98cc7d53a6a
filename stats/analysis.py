"""The study stage: the whole analysis of a set of curves, as one :class:`StudyAnalysis`.

:func:`analyse` runs the stages in order, each returning its results object
(:mod:`stats.results`): the counts at ``analysis.thresholds`` (a per-head table is re-counted
first, :func:`stats.heads.apply_thresholds`); every curve
(:func:`stats.curve_analysis.analyse_curve`); the gaps, milestones and stories
(:func:`stats.gaps.analyse_gaps`); threshold sensitivity; the findings and the PR lead; the
pooling of seed suites (:mod:`stats.pooling`); the reproduction of the reference study
(:mod:`stats.reference`). Random streams are spawned per curve from ``seed``, so a curve's
result does not depend on the order of the others.

``StudyAnalysis.summary()`` is the record ``summary.json`` holds (a dict that prints as text);
``tables()`` the CSV outputs.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from emergence.common.progress import bars_disabled

from stats.config import AnalysisConfig, check_analysis, units_problem
from stats.errors import StatsError
from stats.curve_analysis import CurveAnalysis, analyse_curve  # noqa: F401 (analyse_curve: imported from here too)
from stats.findings import analyse_findings
from stats.gaps import analyse_gaps
from stats.heads import apply_thresholds, thresholds_dict
from stats.parallel import map_tasks, seeded_analysis
from stats.pooling import pool_seeds, pooled_table
from stats.pr_lead import pr_leads
from stats.reference import reproduce
from stats.results import Results, json_safe, written
from stats.sensitivity import Sensitivity, threshold_sensitivity
from stats.story import weigh_stories
from stats.times import GapRatio
from stats.tracked import TrackedResults
from stats.units import get_unit


class StudySummary(dict):
    """A study's record (the content of ``summary.json``: a dict, JSON-safe) that prints as readable
    text, as statsmodels' ``summary()`` does: ``str()`` or :meth:`as_text`."""

    def __init__(self, record: dict, study: "StudyAnalysis"):
        super().__init__(record)
        self._study = study

    def as_text(self) -> str:
        return self._study.text()

    __str__ = as_text


@dataclass
class StudyAnalysis(Results):
    """Everything the suite concludes from one set of curves: each stage's results."""

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

    def curve(self, model: str, head_class: str) -> CurveAnalysis:
        return _find(self.curves, (model, head_class), model=model, head_class=head_class)

    def gap(self, model: str) -> GapRatio:
        """The fitted gap ratio of ``model``."""
        return _find(self.gaps, model, model=model)

    def milestone(self, model: str, name: str):
        return _find(self.milestones, (model, name), model=model, name=name)

    def milestone_gap(self, model: str):
        return _find(self.milestone_gaps, model, model=model)

    def gap_dicts(self) -> list:
        """Every gap of ``summary.json``: the fitted ones, then the milestone ones."""
        return [g.to_dict() | {"definition": "fitted"} for g in self.gaps] + [g.to_dict() for g in self.milestone_gaps]

    def units(self) -> dict:
        """``{class: unit record}`` of every per-head column (stats/units.py: ``unit``, ``description``,
        ``suffix``, ``upper``): what a threshold of the class means, for the report and the figures'
        labels (:func:`stats.units.format_threshold`)."""
        return {c: get_unit(u).to_dict() for c, u in (self.results.source.get("units") or {}).items()}

    @property
    def has_pr(self) -> bool:
        return self.results.has_pr()

    def to_dict(self) -> dict:
        """The content of ``summary.json``: each stage's record in one layout (JSON-safe: NaN and inf
        become null)."""
        return json_safe({
            "source": self.results.source,
            "notes": self.results.notes + self.notes,
            "thresholds": self.results.source.get("thresholds"),
            "units": self.units(),
            "reproduction": written(self.reproduction),
            "stories": written(self.stories),
            "curves": written(self.curves),
            "gaps": self.gap_dicts(),
            "pooled_gaps": written(self.pooled),
            "milestones": written(self.milestones),
            "sensitivity": written(self.sensitivity),
            "findings": {"layer_floor": written(self.layer_floor), "layer_onset": written(self.layer_onset),
                         "convergence": written(self.convergence)},
            "pr_lead": written(self.pr_lead),
            "has_pr_data": self.has_pr,
        })

    def summary(self) -> StudySummary:
        """The record of :meth:`to_dict`, printing as the text of :meth:`text`."""
        return StudySummary(self.to_dict(), self)

    def text(self) -> str:
        """Readable text: the source, then each stage's summary."""
        parts = [self.results.summary(), *(c.summary() for c in self.curves),
                 *(g.summary() for g in self.gaps + self.milestone_gaps), *(g.summary() for g in self.pooled),
                 *(x.summary() for x in self.layer_floor + self.layer_onset + self.convergence + self.pr_lead)]
        if self.sensitivity is not None:
            parts.append(self.sensitivity.summary())
        parts += [st.warning() for st in self.stories if st.warning()]
        return "\n".join(parts)

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
                    fit_rows.append({"model": c.model, "class": c.head_class, "fit": name, "parameter": p, "estimate": float(v),
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


def _find(items: list, key, **attrs):
    """The first of ``items`` whose attributes are ``attrs``; ``KeyError(key)`` without one."""
    for item in items:
        if all(getattr(item, name) == value for name, value in attrs.items()):
            return item
    raise KeyError(key)


def analyse(results: TrackedResults, config: Optional[AnalysisConfig] = None) -> StudyAnalysis:
    """Analyse every curve of ``results`` (re-counted at ``config.thresholds`` when it
    has a per-head table) and the cross-curve findings."""
    cfg = AnalysisConfig() if config is None else config
    check_analysis(cfg)
    thresholds = thresholds_dict(cfg.thresholds)
    results = apply_thresholds(results, thresholds)
    units = results.source.get("units") or {}
    problem = units_problem(units, dataclasses.replace(cfg, thresholds=thresholds))
    if problem:
        raise StatsError(problem)
    cfg, unit_notes = in_units(cfg, units)
    curve_list = list(results.iter_curves())
    seeds = np.random.SeedSequence(cfg.seed).spawn(len(curve_list) + 2)
    analyses = analyse_curves(curve_list, cfg, seeds, results)
    by_key = {(a.model, a.head_class): a for a in analyses}
    gaps = analyse_gaps(results, by_key, cfg, thresholds)
    sensitivity = threshold_sensitivity(results, by_key, cfg, seeds[len(curve_list) + 1])
    weigh_stories(gaps.stories, sensitivity)
    findings = analyse_findings(results, cfg, thresholds, np.random.default_rng(seeds[len(curve_list)]))
    study = StudyAnalysis(results, cfg, analyses, gaps.fitted, findings.layer_floor, findings.layer_onset,
                          findings.convergence, pr_leads(results, cfg), study_notes(results, cfg) + unit_notes, gaps.milestones,
                          gaps.milestone_gaps, sensitivity if sensitivity.rows else None, stories=gaps.stories,
                          pooled=pool_seeds(results, by_key, gaps.fitted, cfg))
    study.reproduction = reproduce(study)
    return study


def in_units(cfg: AnalysisConfig, units: dict) -> tuple:
    """``(cfg, notes)``: the circuit-convergence thresholds (``analysis.findings.convergence_thresholds``,
    ratios by default: the study's 30x and 50x) kept only where they lie in the range of the convergence
    class's unit (a score's circuit is read at its analysis threshold alone), with a note."""
    fc = cfg.findings
    unit = get_unit(units.get(fc.convergence_class)) if fc.convergence_class in units else None
    if unit is None:
        return cfg, []
    kept = [t for t in fc.convergence_thresholds if unit.admits(t)]
    if len(kept) == len(fc.convergence_thresholds):
        return cfg, []
    left = [t for t in fc.convergence_thresholds if not unit.admits(t)]
    note = (f"analysis.findings.convergence_thresholds {left} lie outside the range of {fc.convergence_class}'s "
            f"values (a {unit.description}): circuit convergence read at {kept or 'the analysis threshold'} only")
    return dataclasses.replace(cfg, findings=dataclasses.replace(fc, convergence_thresholds=kept)), [note]


def analyse_curves(curve_list: list, cfg: AnalysisConfig, seeds: list, results: TrackedResults) -> list:
    """The per-curve stage over ``curve_list``, curve ``i`` with its own stream ``seeds[i]``, on
    ``cfg.n_jobs`` processes (:mod:`stats.parallel`: the same results as one after the other)."""
    tasks = list(zip(curve_list, seeds))
    # analyse_curve reads the continuous metrics and the registry, not the per-head table: a light copy for the workers
    light = results if results.heads is None else dataclasses.replace(results, heads=None)
    with tqdm(total=len(tasks), desc="curves", disable=bars_disabled(cfg.progress), leave=False) as bar:
        return map_tasks(seeded_analysis, tasks, cfg.n_jobs, done=bar.update, cfg=cfg, results=light)


def study_notes(results: TrackedResults, cfg: AnalysisConfig) -> list:
    """What the per-head analyses could not compute, and why."""
    notes = []
    column = cfg.pr_lead.column
    if results.heads is not None and (column not in results.heads.columns or not results.heads[column].notna().any()):
        notes.append(f"no PR data: the per-head table has no `{column}` values (analysis.pr_lead.column); "
                     "the PR-lead analysis is empty")
    elif not results.has_pr():
        notes.append("no PR data: the runs have no `pr` column in heads.csv; the PR-lead analysis is empty")
    if results.heads is None:
        notes.append("no per-head table: circuit convergence, PR lead and threshold sensitivity not computed")
    return notes
