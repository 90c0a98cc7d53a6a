"""Threshold sensitivity: do the verdicts, times and gap survive other thresholds?

For each model with per-head selectivities of both gap classes (``times.late_class``,
BOS, and ``times.early_class``, induction) and each grid value g
(``analysis.sensitivity.grid``, default 10, 20, 30, 50, 100): the curve of ONE class
is re-counted with its threshold set to g, the other class kept at its analysis
threshold, and analysed as in the main table (verdict, t50 with its bootstrap
interval, ``analysis.sensitivity.n_boot`` replicates); the gap ratio
t50(late) / t(early) is recomputed against the other class's main analysis. One
class at a time, so that each row says which threshold moves the answer; the row at
a class's own analysis threshold is the main analysis itself.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from emergence.contract import selectivity_column
from stats.curves import Curve


@dataclass
class SensitivityRow:
    model: str
    klass: str
    threshold: float
    other_class: str
    other_threshold: float
    is_analysis_threshold: bool
    k_last: float
    n_last: float
    max_fraction: float
    shape: str
    reason: str
    t50: float = None
    t50_ci: list = None
    t50_bound: str = None
    gap_ratio: float = None
    gap_ratio_ci: list = None
    gap_p_value: float = None
    gap_bound: str = None

    def to_dict(self):
        d = dict(self.__dict__)
        d["class"] = d.pop("klass")
        return d


@dataclass
class Sensitivity:
    grid: list
    n_boot: int
    rule: str
    rows: list = field(default_factory=list)

    def to_dict(self):
        return {"grid": self.grid, "n_boot": self.n_boot, "rule": self.rule, "rows": [r.to_dict() for r in self.rows]}


RULE = ("each grid value sets the threshold of one class (rows grouped by class); the other class keeps its "
        "analysis threshold; gap = t50(late) / t(early) against the other class's main analysis")


def threshold_sensitivity(results, analyses: dict, cfg, seed) -> Sensitivity:
    """The sensitivity table of ``results`` (at the analysis thresholds, with its per-head
    table) given the main curve analyses ``{(model, class): CurveAnalysis}``; ``seed``
    an int or a :class:`numpy.random.SeedSequence`."""
    from stats.analysis import analyse_curve, fitted_gap
    from stats.heads import class_counts

    sc, tc = cfg.sensitivity, cfg.times
    out = Sensitivity([float(g) for g in sc.grid], int(sc.n_boot), RULE)
    heads = results.heads
    if not sc.enabled or heads is None:
        return out
    classes = (tc.late_class, tc.early_class)
    if not all(selectivity_column(c) in heads.columns for c in classes):
        return out
    thr = results.source.get("thresholds") or {}
    scfg = dataclasses.replace(cfg, n_boot=int(sc.n_boot))
    models = [m for m in results.models if all((m, c) in analyses for c in classes)]
    seq = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
    seeds = seq.spawn(max(1, len(models) * 2 * len(out.grid)))
    i = 0
    for model in models:
        h = heads[heads["model"] == model]
        corpus = results.corpus(model)
        for klass, other in (classes, classes[::-1]):
            for g in out.grid:
                rng = np.random.default_rng(seeds[i])
                i += 1
                if np.isclose(g, thr.get(klass, np.nan)):
                    ca = analyses[(model, klass)]
                else:
                    d = class_counts(h, klass, g).sort_values("tokens")
                    curve = Curve.from_frame(d, model, klass, corpus, identity=True)  # the same heads, re-counted
                    curve.flags = results.head_flags(model, klass, curve.revisions, g)
                    ca = analyse_curve(curve, scfg, rng)
                pair = {klass: ca, other: analyses[(model, other)]}
                gap = fitted_gap(model, pair[tc.late_class], pair[tc.early_class], scfg)
                c = ca.curve
                t = ca.times
                frac = c.fraction
                out.rows.append(SensitivityRow(
                    model, klass, g, other, float(thr.get(other, np.nan)), bool(np.isclose(g, thr.get(klass, np.nan))),
                    float(c.k[-1]) if len(c) else float("nan"), float(c.n[-1]) if len(c) else float("nan"),
                    float(frac.max()) if len(c) else float("nan"), ca.verdict.shape, ca.verdict.reason,
                    None if t is None else t.t50, None if t is None else t.t50_ci, None if t is None else t.t50_bound,
                    gap.ratio, gap.ratio_ci, gap.p_value, gap.bound))
    return out
