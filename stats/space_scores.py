"""Scores of the analysis over the space of simulated studies (:mod:`stats.study_space`), overall
and by factor: what the calibration and operating-characteristic benchmarks print.

:func:`study_records` and :func:`pair_records` analyse studies drawn at random: one record a
study, its factor bins (:func:`factor_bins`) and its scores (:func:`score_study`);
:func:`factor_table` prints any criterion over all records and by factor; :func:`thinned_verdicts`
checks that no verdict flips when checkpoints are added.
"""

from __future__ import annotations

import collections
from typing import Callable, Optional

import numpy as np

from stats.simulate import t50_covered
from stats.study_space import DEFAULT_CRITERION, DETECTABLE_Z, SampledStudy, StudySpace, sample_pair, sample_study

#: The factors of the by-factor tables, in print order.
FACTORS = ("grid", "revisions", "position", "switching heads", "regime", "true width", "detectable", "shape seen")


def score_study(analysis, study: SampledStudy) -> dict:
    """How a curve analysis (:class:`stats.curve_analysis.CurveAnalysis`) fares against a sampled
    study's truth: ``shape`` (the verdict is one :meth:`StudyTruth.accepted`), ``changed`` (any
    verdict but ``none``), ``censored`` (the censoring side is the truth's), ``covers``
    (:func:`stats.simulate.t50_covered`; None where no t50 is reported: ``timed`` says which); the
    last two None for flat truths.

    Two readings of the data are as right as the truth's side: a rise in the last interval read
    as a lower bound after the revision before the last (``right``, :mod:`stats.censoring`), and,
    for followed heads with a background on from the first revision (``present_at_start`` at
    least two heads), a class present at the start read as formed before it (``left``) when its
    switching heads form after the range: the data are those of a class present throughout, and
    the switching heads' t50 is not what that bound is about (``covers`` None)."""
    truth = study.truth
    shape = analysis.verdict.shape
    out = {"verdict": shape, "shape": shape in truth.accepted(), "changed": shape != "none",
           "censored": None, "covers": None, "timed": None}
    if truth.flat:
        return out
    sides = {truth.censored}
    if truth.position == "last":
        sides.add("right")
    ambiguous = truth.censored == "right" and truth.present_at_start >= 2 and analysis.censored == "left"
    t = analysis.times
    covers = t50_covered(t, truth.t50) if t is not None and not ambiguous else None
    return out | {"censored": analysis.censored in sides or ambiguous, "covers": covers, "timed": t is not None}


#: Bins of the by-factor tables: revisions (positive-token revisions) and switching heads.
REVISION_BINS = ((5, 6), (7, 10), (11, 20), (21, 40), (41, 150))
SWITCH_BINS = ((3, 9), (10, 39), (40, 149), (150, 400))


def _bin(v: int, bins) -> str:
    for lo, hi in bins:
        if lo <= v <= hi:
            return f"{lo}-{hi}"
    return f">{bins[-1][1]}" if v > bins[-1][1] else f"<{bins[0][0]}"


def factor_bins(study: SampledStudy) -> dict:
    """The study's bin of every factor of the by-factor tables: grid kind, revisions, position,
    switching heads, regime, the true width against C (``sharp``: below C / 1.5;
    ``borderline``; ``gradual``: above 1.5 C; ``flat``), whether the change is detectable
    (:attr:`stats.study_space.StudyTruth.detectable`) and whether its shape is seen (``yes``; hidden
    by the ``grid`` or by the ``noise``, :attr:`~stats.study_space.StudyTruth.shape_resolvable`)."""
    f, t = study.factors, study.truth
    width = "flat" if t.flat else ("borderline" if t.borderline else t.shape)
    seen = "flat" if t.flat else ("yes" if t.shape_resolvable else ("grid" if not t.grid_resolvable else "noise"))
    return {"grid": f["grid"], "revisions": _bin(f["revisions"], REVISION_BINS), "position": t.position,
            "switching heads": "flat" if t.flat else _bin(f["n_switch"], SWITCH_BINS), "regime": f["regime"],
            "true width": width, "detectable": "flat" if t.flat else ("yes" if t.detectable else "no"),
            "shape seen": seen}


def criterion_of(cfg) -> float:
    """The criterion C (decades) of an :class:`~stats.config.AnalysisConfig`: ``shape.sharp_width_decades``."""
    return float(getattr(cfg.shape, "sharp_width_decades", DEFAULT_CRITERION))


def _streams(n: int, rng: np.random.Generator, desc: str, progress: bool):
    """``n`` pairs of generators (one draws a study, the other analyses it), seeded from ``rng``, under a
    progress bar ``desc``: the studies drawn do not depend on how many numbers an analysis consumes,
    so two versions of the analysis are scored on the same studies."""
    from tqdm.auto import tqdm

    seeds = rng.integers(0, 2**63, n)
    for seed in tqdm(seeds, total=n, desc=desc, disable=not progress, leave=False):
        yield np.random.default_rng([int(seed), 0]), np.random.default_rng([int(seed), 1])


def study_records(n: int, cfg, rng: np.random.Generator, space: StudySpace = StudySpace(),
                  progress: bool = False) -> list:
    """Analyse ``n`` studies drawn from ``space``: one record each, its factor bins and
    :func:`score_study` (and ``flat``, ``inside``: a rise whose t50 lies in the range,
    ``resolvable``)."""
    from stats.curve_analysis import analyse_curve

    C = criterion_of(cfg)
    out = []
    for draw, analysis in _streams(n, rng, "sampled studies", progress):
        study = sample_study(draw, space, C)
        t = study.truth
        record = {**factor_bins(study), "flat": t.flat, "inside": not t.flat and t.censored is None,
                  "resolvable": t.resolvable}
        try:
            out.append(record | score_study(analyse_curve(study.curve(), cfg, analysis), study))
        except Exception as e:  # counted as wrong, and said: a benchmark reports what fails
            out.append(record | _failed(study, e))
    return out


def thinned_verdicts(n: int, cfg, rng: np.random.Generator, space: StudySpace = StudySpace(),
                     progress: bool = False) -> collections.Counter:
    """The shape verdicts of ``n`` studies drawn from ``space`` read on every other revision (the
    first and last kept) and on all of them: a count of ``(coarse, fine)`` pairs over the studies of
    10 revisions or more that are not flat. Refining the grid may resolve a verdict or add doubt;
    it must never turn ``sharp`` into ``gradual`` or back."""
    from stats.curve_analysis import analyse_curve

    C, pairs = criterion_of(cfg), collections.Counter()
    for draw, analysis in _streams(n, rng, "thinned studies", progress):
        study = sample_study(draw, space, C)
        curve = study.curve()
        m = len(curve)
        if m < 10 or study.truth.flat:
            continue
        coarse = curve.at(np.unique(np.r_[np.arange(0, m, 2), m - 1]))
        seed = int(analysis.integers(2**63))
        pairs[(analyse_curve(coarse, cfg, np.random.default_rng(seed)).verdict.shape,
               analyse_curve(curve, cfg, np.random.default_rng(seed)).verdict.shape)] += 1
    return pairs


def _failed(study: SampledStudy, error: Exception) -> dict:
    """The scores of a study whose analysis raised: wrong on every criterion, the error kept."""
    flat = study.truth.flat
    return {"verdict": "error", "shape": False, "changed": not flat, "censored": None if flat else False,
            "covers": None if flat else False, "rejected": False, "error": f"{type(error).__name__}: {error}"}


def errors(records: list) -> list:
    """The distinct errors of records whose analysis raised, with their counts: ``[(error, count)]``."""
    return collections.Counter(r["error"] for r in records if r.get("error")).most_common()


def pair_bins(early: SampledStudy, late: SampledStudy) -> dict:
    """A pair's bins: the early class's grid, revisions, position and regime, the fewer switching heads
    of the two, the wider true width of the two, and ``detectable``: both changes are detectable, a
    revision lies between the two t50s (else the checkpoints cannot order them) and the gap is at
    least :data:`~stats.study_space.DETECTABLE_Z` oracle standard errors of both t50s
    (:func:`~stats.study_space.oracle_t50_se` for aggregate counts,
    :func:`~stats.study_space.oracle_median_se` for followed heads): a smaller gap the noise or the
    spread of a few heads' median hides, whatever the grid."""
    bins, other = factor_bins(early), factor_bins(late)
    del bins["shape seen"]  # a pair is judged by its separation, not by a shape
    order = ("sharp", "borderline", "gradual")
    fewer = early if early.factors["n_switch"] <= late.factors["n_switch"] else late
    x = np.log10(early.sim.tokens[early.sim.tokens > 0])
    lo, hi = sorted(np.log10([early.truth.t50, late.truth.t50]))
    between = bool(np.any((x > lo) & (x < hi)))
    se = np.hypot(early.truth.t50_se, late.truth.t50_se)
    resolved = se == 0 or (hi - lo) / se >= DETECTABLE_Z
    return bins | {"switching heads": factor_bins(fewer)["switching heads"],
                   "true width": max(bins["true width"], other["true width"], key=order.index),
                   "detectable": "yes" if early.truth.detectable and late.truth.detectable and between and resolved
                   else "no"}


def pair_records(n: int, ratio: float, cfg, rng: np.random.Generator, space: StudySpace = StudySpace(),
                 progress: bool = False) -> list:
    """Analyse ``n`` pairs of classes drawn at ``ratio`` (:func:`stats.study_space.sample_pair`): one
    record each, the pair's bins and ``rejected`` (the fitted gap's one-sided test of ratio <= 1 at
    ``cfg.alpha``)."""
    from stats.curve_analysis import analyse_curve
    from stats.gaps import fitted_gap

    C = criterion_of(cfg)
    out = []
    for draw, analysis in _streams(n, rng, f"pairs at {ratio:g}x", progress):
        early, late = sample_pair(draw, ratio, space, C)
        try:
            gap = fitted_gap("sim", analyse_curve(late.curve("sim", cfg.times.late_class), cfg, analysis),
                             analyse_curve(early.curve("sim", cfg.times.early_class), cfg, analysis), cfg)
            result = {"rejected": bool(np.isfinite(gap.p_value) and gap.p_value <= cfg.alpha)}
        except Exception as e:  # a failed pair separates nothing
            result = {"rejected": False, "error": f"{type(e).__name__}: {e}"}
        out.append(pair_bins(early, late) | result)
    return out


def rate(records: list, metric: str, where: Optional[Callable] = None) -> tuple:
    """(mean of ``metric`` over the records where ``where`` holds and the metric is not None, count)."""
    vals = [r[metric] for r in records if (where is None or where(r)) and r.get(metric) is not None]
    return (float(np.mean(vals)) if vals else float("nan")), len(vals)


def factor_table(records: list, columns: dict, factors=FACTORS) -> list:
    """Lines of a table: every column over all records, then by the bins of each factor.

    ``columns``: ``{title: (metric, where)}`` (:func:`rate`); a cell prints the rate and, in
    brackets, how many records it rests on."""
    titles = list(columns)
    head = f"  {'factor':<16} {'bin':<12}" + "".join(f" {t:>20}" for t in titles)
    lines = [head]

    def row(factor, label, subset):
        cells = []
        for title in titles:
            value, count = rate(subset, *columns[title])
            cells.append(f" {'-':>20}" if not count else f" {f'{value:.3f} ({count})':>20}")
        lines.append(f"  {factor:<16} {label:<12}" + "".join(cells))

    row("all", "", records)
    for factor in factors:
        labels = sorted({r[factor] for r in records if factor in r}, key=_bin_order)
        for label in labels:
            row(factor, label, [r for r in records if r.get(factor) == label])
    return lines


def _bin_order(label: str):
    order = ("yes", "no", "grid", "noise", "log", "linear", "pythia", "before", "first", "inside", "last", "after",
             "identity", "aggregate", "sharp", "borderline", "gradual", "flat")
    if label in order:
        return (0, order.index(label), 0)
    digits = "".join(ch if ch.isdigit() else " " for ch in label).split()
    return (1, 0, int(digits[0]) if digits else 0)
