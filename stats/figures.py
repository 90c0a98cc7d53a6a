"""Figures (matplotlib, Agg backend; every figure a PNG, and PDF or SVG on request: :mod:`stats.plotstyle`).

- ``curve_<model>_<class>.png``: the observed heads (a count where the same heads are
  followed, ``identity``; else the fraction with Wilson 95 % bars), the four fits of the
  rise (the lowest AICc marked in the legend), the logistic's 95 % bootstrap band (pointwise
  percentiles of replicate curves), the primary change point (shaded between its bracketing
  revisions), t50 with its interval; titled with the verdict as the report prints it and its
  reason; a censored curve has an arrow from its bounding revision outwards and says
  ``t50 <= t_1`` or ``t50 > t_m``, a decline is shaded grey (it is not fitted); a class with
  no head flagged at any revision gets no figure;
- ``layers_<model>.png``: heatmap of BOS heads per layer (rows) and revision (columns);
- ``timeline.png``: per model, t(induction) and t50(BOS) with intervals (a censored time is a
  ``<`` or ``>`` marker at its bound, an open interval end an arrowhead), and the ratio
  (``>=`` / ``<=`` for a bound);
- ``pr_<model>.png``: PR trajectories of the top final induction heads, with the
  elevation threshold, and the elevation and crossing revisions;
- ``convergence.png``: recall of the final induction set against tokens;
- ``continuous_<model>.png``: the continuous metrics against tokens;
- ``models_<class>.png``: every model's fraction of the gap classes on one log-token axis and on
  the fraction of each model's training (several models);
- per-head views (:mod:`stats.headviews`): ``heads_<model>_<class>.png`` and ``circuit_<model>.png``;
- seed suites (:mod:`stats.pooling`): ``seeds_<group>.png`` (:func:`seed_curves_figure`) and
  ``forest_<group>.png`` (:func:`forest_figure`);
- a parent run's figures, before any analysis (:func:`fraction_figures`): ``fractions.png`` and
  ``fraction.<class>.png``.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402
import numpy as np  # noqa: E402
from scipy import stats as sps  # noqa: E402

from tqdm.auto import tqdm  # noqa: E402

from emergence.common.contract import FRACTION, RunSeed, selectivity_column  # noqa: E402
from emergence.common.progress import bars_disabled  # noqa: E402
from stats.findings import class_layer_counts  # noqa: E402
from stats.headviews import circuit_figure, heads_heatmap  # noqa: E402
from stats.plotstyle import count_axis, format_tokens, fraction_axis, paper_style, save, share_axis, token_axis  # noqa: E402
from stats.units import BOUND_SIGN  # noqa: E402

COLORS = {"logistic": "C0", "step": "C3", "ramp": "C2", "constant": "C7"}
#: Font sizes of a parent run's figures (:func:`fraction_figures`).
PARENT_FONT_PT, PARENT_SMALL_PT = 9, 8


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in str(name))


def wilson_interval(k, n, level=0.95):
    """Wilson score interval of k of n, with lo <= k/n <= hi exactly.

    In exact arithmetic lo = 0 at k = 0 and hi = 1 at k = n; in floating point the
    bound can land a hair on the wrong side of k/n (k = 0, n = 48 gives lo = 1e-17),
    so the bounds are clipped to [0, k/n] and [k/n, 1].
    """
    k = np.asarray(k, float)
    n = np.asarray(n, float)
    z = sps.norm.ppf(0.5 + level / 2)
    p = k / n
    denom = 1 + z**2 / n
    centre = (p + z**2 / (2 * n)) / denom
    half = z * np.sqrt(np.clip(p * (1 - p), 0, None) / n + z**2 / (4 * n**2)) / denom
    return np.clip(centre - half, 0.0, p), np.clip(centre + half, p, 1.0)


def _open_ci(ci, lo_edge: float, hi_edge: float) -> tuple:
    """(lower, upper) ends of an interval for drawing, an open end (None) at the axis edge,
    and whether each end is open."""
    lo, hi = (ci or [None, None])[:2]
    return (lo_edge if lo is None else lo), (hi_edge if hi is None else hi), lo is None, hi is None


def _counted(ca) -> float:
    """The number of heads when the curve follows the same heads (``identity``, a fixed head count):
    its points are drawn as counts of heads; 0 otherwise (fractions with binomial bars)."""
    c = ca.curve
    if ca.regime != "identity" or not len(c) or not np.all(c.n == c.n[0]) or c.n[0] <= 0:
        return 0.0
    return float(c.n[0])


def _mark_censoring(ax, ca, scale: float) -> None:
    """An arrow from the bounding revision outwards, and its label, for a censored curve."""
    c, side = ca.curve, ca.censored
    t = float(c.tokens[0] if side == "left" else c.tokens[-1])
    y = scale * float(np.max(c.fraction)) / 2
    end = t / 3 if side == "left" else t * 3
    ax.annotate("", xy=(end, y), xytext=(t, y), arrowprops=dict(arrowstyle="->", color="C4", lw=1.6))
    ax.axvline(t, color="C4", ls=":", lw=1)
    text = f"{side}-censored:\nt50 {'<=' if side == 'left' else '>'} {format_tokens(t)} tokens"
    ax.text(end, y, text, ha="left" if side == "left" else "right", va="bottom", fontsize=8, color="C4")
    lo, hi = ax.get_xlim()
    ax.set_xlim(min(lo, end / 1.5), max(hi, end * 1.5))


def _observed(ax, c, heads: float) -> None:
    """The observed points: counts of heads (``heads`` > 0: the same heads followed, no error bars),
    else fractions with Wilson 95 % bars."""
    if heads:
        ax.plot(c.tokens, c.k, "o", color="k", ms=4.5, label="heads flagged", zorder=5)
        return
    f = c.fraction
    lo, hi = wilson_interval(c.k, c.n)
    ax.errorbar(c.tokens, f, yerr=[np.clip(f - lo, 0, None), np.clip(hi - f, 0, None)],
                fmt="o", color="k", ms=4, capsize=2, label="observed (Wilson 95%)", zorder=5)


def _fits(ax, ca, grid, scale: float) -> None:
    """The logistic's bootstrap band and the four fits, the best by AICc marked in the legend."""
    if ca.boot is not None and ca.fits is not None:
        model = ca.fits["logistic"].model
        sub = ca.boot.theta[: min(len(ca.boot.theta), 400)]
        blo, bhi = np.quantile(model.mean(sub, np.log10(grid)), [0.025, 0.975], axis=0)
        ax.fill_between(grid, scale * blo, scale * bhi, color="C0", alpha=0.18, lw=0, label="logistic 95% band")
    fits = ca.fits or {}
    best = min(fits, key=lambda name: fits[name].aicc) if fits else None
    for name, fit in fits.items():
        ax.plot(grid, scale * np.asarray(fit.predict(grid)), color=COLORS.get(name, None),
                lw=1.6 if name == "logistic" else 1.0, ls="-" if name == "logistic" else "--",
                label=f"{name} (AICc {fit.aicc:.1f}{', lowest' if name == best and len(fits) > 1 else ''})")


def _t50_marker(ax, ca, grid, scale: float) -> None:
    t = ca.times
    if t is None or ca.fits is None or ca.censored or not t.t50:
        return
    yl = scale * ca.fits["logistic"].predict([t.t50])[0]
    lo_t, hi_t, open_lo, open_hi = _open_ci(t.t50_ci, grid[0], grid[-1])
    if np.isfinite(lo_t) and np.isfinite(hi_t):
        ax.errorbar([t.t50], [yl], xerr=[[t.t50 - lo_t], [hi_t - t.t50]], fmt="D", color="C4", ms=6, capsize=3,
                    label="t50 (95% CI" + (", open end" if open_lo or open_hi else "") + ")", zorder=6)


def curve_title(ca) -> str:
    """The title of a curve's figure: the verdict as the report prints it (``ca.verdict_text``), then
    its reason, wrapped (the legend's lowest AICc is the best fit, not the verdict's criterion)."""
    extra = f", {ca.censored}-censored" if ca.censored else ""
    extra += ", rise then decline" if ca.phases is not None and ca.phases.decline is not None else ""
    reason = textwrap.shorten(ca.verdict.reason, 300, placeholder=" ...")
    return f"{ca.model} / {ca.head_class}: {ca.verdict_text}{extra}\n" + "\n".join(textwrap.wrap(reason, 90))


def curve_figure(ca, path: Path) -> Path:
    """The curve of one model and class (module docstring); heads counted where the same heads are
    followed (:func:`_counted`), fractions with binomial bars otherwise."""
    c = ca.curve
    heads = _counted(ca)
    scale = heads or 1.0
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    if len(c):
        _observed(ax, c, heads)
        rise = c.tokens[: ca.phases.rise_end] if ca.phases is not None else c.tokens
        grid = np.logspace(np.log10(rise.min()) - 0.1, np.log10(rise.max()) + 0.1, 300)
        d = None if ca.phases is None else ca.phases.decline
        if d is not None:  # shaded from the peak on: not fitted
            ax.axvspan(d.peak_tokens, float(c.tokens[-1]), color="0.5", alpha=0.10, lw=0,
                       label=f"decline: {d.peak_heads:.3g} -> {d.later_heads:.3g} heads (not fitted)")
        _fits(ax, ca, grid, scale)
        cp = ca.changepoints.primary if ca.changepoints is not None else None
        if cp is not None:
            ax.axvspan(cp.tokens_before, cp.tokens_after, color="C1", alpha=0.12, lw=0, label="change point")
        _t50_marker(ax, ca, grid, scale)
        token_axis(ax)
        if ca.censored:
            _mark_censoring(ax, ca, scale)
    ax.set_xlabel("training tokens")
    if heads:
        ax.set_ylabel(f"{c.head_class} heads (of {heads:.0f})")
        count_axis(ax, float(np.max(c.k)) if len(c) else 1.0)
    else:
        ax.set_ylabel(f"fraction of heads: {c.head_class}")
        fraction_axis(ax, max(0.1, float(np.max(c.fraction)) if len(c) else 1.0))
    ax.set_title(curve_title(ca), fontsize=9, loc="left")
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False)
    return save(fig, path)


def has_heads(ca) -> bool:
    """Whether a curve has any head flagged at any revision: a class with none gets no figure."""
    return bool(len(ca.curve)) and float(np.max(ca.curve.k)) > 0


def layers_figure(counts, model: str, head_class: str, path: Path, floor_layers=(0, 1)) -> Path:
    revs = counts.drop_duplicates("revision").sort_values("tokens")
    L = int(counts["layer"].max()) + 1
    grid = np.zeros((L, len(revs)))
    col = {r: i for i, r in enumerate(revs["revision"])}
    for r in counts.itertuples():
        grid[int(r.layer), col[r.revision]] = r.k
    fig, ax = plt.subplots(figsize=(max(5.0, 0.6 * len(revs) + 2), max(3.0, 0.3 * L + 1.5)))
    im = ax.imshow(grid, aspect="auto", origin="lower", cmap="viridis")
    for i in range(L):
        for j in range(len(revs)):
            ax.text(j, i, f"{int(grid[i, j])}", ha="center", va="center", fontsize=8,
                    color="w" if grid[i, j] < grid.max() / 2 else "k")
    for lf in floor_layers:
        if lf < L:
            ax.axhline(lf + 0.5, color="r", lw=0.6, ls=":")
    ax.set_xticks(range(len(revs)), labels=[format_tokens(t) for t in revs["tokens"]], rotation=45, ha="right")
    ax.set_yticks(range(L), labels=range(L))
    ax.set_xlabel("revision (training tokens)")
    ax.set_ylabel("layer")
    ax.set_title(f"{model}: {head_class} heads per layer", fontsize=10)
    fig.colorbar(im, ax=ax, label="heads", ticks=MaxNLocator(integer=True))  # counts: whole heads
    return save(fig, path)


def timeline_figure(analysis, path: Path) -> Path:
    tc = analysis.config.times
    models = analysis.results.models
    fig, ax = plt.subplots(figsize=(7.0, 1.2 + 0.7 * len(models)))
    gaps = 0
    for i, model in enumerate(models):
        for head_class, color, dy in ((tc.early_class, "C0", 0.12), (tc.late_class, "C3", -0.12)):
            ca = _curve_or_none(analysis, model, head_class)
            t = None if ca is None else ca.times
            if t is None:
                continue
            t50 = head_class == tc.late_class or tc.formation == "t50"
            val, ci = (t.t50, t.t50_ci) if t50 else (t.onset, t.onset_ci)
            lo, hi, open_lo, open_hi = _open_ci(ci, val / 3, val * 3)
            marker = {"left": "<", "right": ">"}.get(ca.censored, "o")
            ax.errorbar([val], [i + dy], xerr=[[max(val - lo, 0)], [max(hi - val, 0)]], fmt=marker, color=color,
                        capsize=0 if (open_lo or open_hi) else 3, label=head_class)
            for open_end, edge, sign in ((open_lo, lo, "<"), (open_hi, hi, ">")):
                if open_end:  # an open interval end (a censored or unbounded side): an arrowhead
                    ax.plot([edge], [i + dy], marker=sign, color=color, ms=5)
        gaps += _gap_label(ax, analysis, model, i)
    if gaps:  # the column of ratios, headed by what they are
        ax.text(1.01, 1.0, f"gap\n{tc.late_class} / {tc.early_class}", transform=ax.transAxes, va="bottom", fontsize=8)
    handles, labels = ax.get_legend_handles_labels()
    if handles:  # a time drawn
        token_axis(ax)
        unique = dict(zip(labels, handles))
        ax.legend(unique.values(), unique.keys(), loc="upper left", bbox_to_anchor=(1.16 if gaps else 1.02, 1.0),
                  frameon=False)
    else:
        ax.text(0.5, 0.5, "no transition times (every curve has verdict none)", transform=ax.transAxes,
                ha="center", va="center", fontsize=9)
    ax.set_yticks(range(len(models)), labels=models)
    ax.set_ylim(-0.6, len(models) - 0.4)
    ax.set_xlabel("training tokens")
    ax.set_title(f"{tc.early_class} ({tc.formation}) and {tc.late_class} (t50), 95% intervals")
    return save(fig, path)


def _curve_or_none(analysis, model: str, head_class: str):
    """The curve analysis of ``model`` and ``head_class``, or None where there is none."""
    try:
        return analysis.curve(model, head_class)
    except KeyError:
        return None


def _gap_label(ax, analysis, model: str, row: int) -> int:
    """The model's gap ratio right of its row (``0.6x``; ``>= 1.7x`` for a bound); 1 when written."""
    try:
        g = analysis.gap(model)
    except KeyError:
        return 0
    if not np.isfinite(g.ratio):
        return 0
    sign = BOUND_SIGN.get(g.bound, "")
    ax.text(1.01, row, f"{sign}{g.ratio:.2g}x", transform=ax.get_yaxis_transform(), va="center", fontsize=8)
    return 1


def pr_figure(lead, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    thr = lead.thresholds[lead.thresholds["tokens"] > 0]
    ax.plot(thr["tokens"], thr["threshold"], color="k", ls=":", lw=1, label="elevation threshold")
    ax.plot(thr["tokens"], thr["median"], color="0.6", ls="-", lw=1, label="median PR")
    by_head = {(h.layer, h.head): h for h in lead.heads}
    for i, (layer, head) in enumerate(lead.top):
        g = lead.trajectories[(lead.trajectories["layer"] == layer) & (lead.trajectories["head"] == head)
                              & (lead.trajectories["tokens"] > 0)]
        ax.plot(g["tokens"], g[lead.column], marker=".", color=f"C{i}", label=f"L{layer}H{head}")
        h = by_head[(layer, head)]
        for tokens, marker, face in ((h.tokens_elevated, "^", None), (h.tokens_crossed, "s", "none")):
            at = g["tokens"] == tokens  # no revision where None: never elevated or crossed
            if at.any():
                ax.plot([tokens], g.loc[at, lead.column].iloc[:1], marker, mfc=face, color=f"C{i}", ms=8)
    token_axis(ax)
    ax.set_xlabel("training tokens")
    ax.set_ylabel(lead.column)
    ax.set_title(f"{lead.model}: PR of the top induction heads\n(triangle: lead revision, square: crosses the threshold)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False)
    return save(fig, path)


#: Line styles of the convergence curves, one per threshold of a model (coinciding lines stay visible).
CONVERGENCE_STYLES = (("o", "-", 5.0), ("s", "--", 8.0), ("^", ":", 7.0), ("D", "-.", 6.0))


def convergence_figure(convs, path: Path) -> Path:
    """Recall of each model's final set against tokens, one line per threshold (a marker and a dash
    each, open markers under filled ones: coinciding lines both show, and the legend says so)."""
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    models = list(dict.fromkeys(c.model for c in convs))
    drawn: dict = {}
    for c in convs:
        t = c.table[(c.table["tokens"] > 0) & c.table["recall"].notna()]
        if t.empty:
            continue
        color = f"C{models.index(c.model) % 10}"
        marker, dash, size = CONVERGENCE_STYLES[sum(1 for m, _ in drawn if m == c.model) % len(CONVERGENCE_STYLES)]
        key = (c.model, tuple(np.round(t["recall"].to_numpy(float), 6)))
        same = next((at for (m, curve), at in drawn.items() if m == c.model and curve == key[1]), None)
        at = "" if c.threshold is None else f", >= {c.threshold:g}x"
        label = f"{c.model} (n={c.n_final}{at})" + (f": the same line as{same}" if same is not None else "")
        ax.plot(t["tokens"], t["recall"], marker=marker, ls=dash, ms=size, mfc="none" if drawn else color,
                color=color, label=label)
        drawn[key] = at
        if c.tokens_at_level:
            ax.axvline(c.tokens_at_level, color=color, ls=":", lw=0.8)
    if convs:
        ax.axhline(convs[0].level, color="k", ls="--", lw=0.8, label=f"recall {convs[0].level:.2f}")
    if drawn:
        token_axis(ax)
    else:
        ax.text(0.5, 0.5, "no final induction heads", transform=ax.transAxes, ha="center", va="center")
    ax.set_ylim(0.0, 1.03)
    ax.set_xlabel("training tokens")
    ax.set_ylabel("recall of the final induction set")
    ax.set_title("When the final induction heads are in place: share of them flagged at each revision")
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False)
    return save(fig, path)


def continuous_figure(cont, model: str, path: Path) -> Path:
    """The continuous metrics of a model against tokens, one panel each, every panel on the same
    log-token axis (the model's range)."""
    d = cont[(cont["model"] == model) & (cont["tokens"] > 0)]
    metrics = sorted(d["metric"].unique())
    nrow = int(np.ceil(len(metrics) / 3))
    fig, axes = plt.subplots(nrow, 3, figsize=(9, 2.3 * nrow), squeeze=False)
    span = (float(d["tokens"].min()) / 1.2, float(d["tokens"].max()) * 1.2)
    for ax, metric in zip(axes.flat, metrics):
        g = d[d["metric"] == metric].sort_values("tokens")
        y, title = g["value"].to_numpy(float), metric
        if metric.startswith("mean_selectivity") and (y > 0).all():
            y, title = np.log10(y), f"log10 {metric}"
        ax.plot(g["tokens"].to_numpy(float), y, marker="o", ms=3)
        token_axis(ax)
        ax.set_xlim(span)  # every panel on the model's token range, whatever its metric's points
        ax.set_title(title)
        ax.set_xlabel("training tokens")
    for ax in list(axes.flat)[len(metrics):]:
        ax.axis("off")
    fig.suptitle(f"{model}: continuous metrics")
    fig.tight_layout()
    return save(fig, path)


def seed_curves_figure(group, analysis, path: Path) -> Path:
    """Per seed group: each run's observed fraction and fitted logistic of the two gap classes
    (one panel each, log-token axis), the pooled t50 (random-effects, :mod:`stats.pooling`)
    with its interval shaded and the prediction interval for a new run lighter."""
    fig, axes = plt.subplots(1, 2, figsize=(10.5, 4.0), sharey=False)
    for ax, head_class in zip(axes, (group.early_class, group.late_class)):
        for i, row in enumerate(group.per_seed):
            ca = _curve_or_none(analysis, row["model"], head_class)
            if ca is None:
                continue
            c, color = ca.curve, f"C{i % 10}"
            ax.plot(c.tokens, c.fraction, "o", ms=3, color=color, alpha=0.8,
                    label=RunSeed(row["seed"], row["seed_kind"], group.model).label
                    + ("" if row["used"] else " (not pooled)"))
            if ca.fits is not None and len(c):
                grid = np.logspace(np.log10(c.tokens.min()), np.log10(c.tokens.max()), 200)
                ax.plot(grid, ca.fits["logistic"].predict(grid), color=color, lw=1.0, alpha=0.8)
        pooled = group.t50.get(head_class)
        if pooled:
            for ci, alpha, label in ((pooled["prediction_interval"], 0.08, "prediction interval (new run)"),
                                     (pooled["ci"], 0.22, f"pooled t50 {pooled['level']:.0%} CI")):
                lo, hi = _band(ci, ax)
                if lo is not None:
                    ax.axvspan(lo, hi, color="C4", alpha=alpha, lw=0, label=label)
            if pooled["t50"] is not None:
                ax.axvline(pooled["t50"], color="C4", lw=1.5, label="pooled t50")
        ax.set_xscale("log")
        ax.set_xlabel("training tokens")
        ax.set_ylabel(f"fraction of heads: {head_class}")
        ax.set_title(f"{group.model} / {head_class}: {len(group.per_seed)} runs", fontsize=9)
        ax.legend(fontsize=6, loc="best")
    return save(fig, path)


def _band(ci, ax) -> tuple:
    """(lo, hi) of an interval for a shaded band, an open end at the axis edge; (None, None) when
    both ends are open."""
    lo, hi = (ci or [None, None])[:2]
    if lo is None and hi is None:
        return None, None
    edge_lo, edge_hi = ax.get_xlim() if ax.get_xscale() == "log" else (lo or hi, hi or lo)
    return (lo if lo is not None else min(edge_lo, hi / 10)), (hi if hi is not None else max(edge_hi, lo * 10))


def forest_figure(group, path: Path) -> Path:
    """Forest plot of one seed group: each run's gap ratio with its interval (a censored run's
    bound as an arrow from it), the pooled ratio as a diamond with its interval, and the
    prediction interval for a new run; log axis, the line ratio = 1."""
    rows = group.per_seed
    fig, ax = plt.subplots(figsize=(7.0, 1.6 + 0.36 * (len(rows) + 2)))
    ys = list(range(len(rows) + 1, 1, -1))
    vals = []
    for y, row in zip(ys, rows):
        r = row["ratio"]
        if r is None or not np.isfinite(r):
            ax.text(1.0, y, "no gap", va="center", ha="center", fontsize=7, color="0.4")
            continue
        lo, hi = (row["ci"] or [None, None])[:2]
        color = "k" if row["used"] else "0.6"
        ax.plot([lo if lo is not None else r, hi if hi is not None else r], [y, y], color=color, lw=1.2)
        marker = {"lower": ">", "upper": "<"}.get(row["bound"], "s")
        ax.plot([r], [y], marker, color=color, ms=6)
        if row["bound"]:
            ax.annotate("", xy=(r * (3 if row["bound"] == "lower" else 1 / 3), y), xytext=(r, y),
                        arrowprops=dict(arrowstyle="->", color=color, lw=1.2))
        vals += [v for v in (r, lo, hi) if v is not None]
    labels = [RunSeed(r["seed"], r["seed_kind"], group.model).label
              + {"lower": " (>=)", "upper": " (<=)"}.get(r["bound"], "") for r in rows]
    d = group.to_dict()
    if d["ratio"] is not None or d["bound"]:
        lo, hi = d["ci"]
        centre = d["ratio"] if d["ratio"] is not None else (lo if lo is not None else hi)
        lo_e, hi_e = lo if lo is not None else centre, hi if hi is not None else centre * 10
        ax.fill([lo_e, centre, hi_e, centre], [1, 1.25, 1, 0.75], color="C3", alpha=0.8,
                label=f"pooled {centre:.3g}x ({group.level:.0%} CI)")
        plo, phi = d["prediction_interval"]
        if plo is not None and phi is not None:
            ax.plot([plo, phi], [0.45, 0.45], color="C3", lw=2.5, alpha=0.5, label="prediction interval (new run)")
            vals += [plo, phi]
        vals += [v for v in (lo, hi, centre) if v is not None]
    ax.axvline(1.0, color="0.3", ls=":", lw=1)
    ax.set_xscale("log")
    if vals:
        ax.set_xlim(min(min(vals), 1.0) / 2, max(max(vals), 1.0) * 2)
    ax.set_yticks(ys + [1], labels=labels + ["pooled"], fontsize=8)
    ax.set_ylim(0.2, len(rows) + 1.6)
    ax.set_xlabel(f"gap ratio t50({group.late_class}) / t({group.early_class})")
    p = d["p_value"]
    extra = "" if p is None else f", p = {p:.3g}, tau^2 = {d['tau2']:.3g}, I^2 = {d['i2']:.0%}"
    ax.set_title(f"{group.model}: per-run gap ratios and the pooled gap{extra}", fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    return save(fig, path)


def heads_views(analysis, draw) -> None:
    """The per-head views (:mod:`stats.headviews`) of every model and class with per-head
    selectivities, at the analysis thresholds."""
    heads = analysis.results.heads
    thresholds = analysis.results.source.get("thresholds") or {}
    if heads is None:
        return
    circuit_class = analysis.config.findings.convergence_class
    for model in analysis.results.models:
        if not (heads["model"] == model).any():
            continue
        for head_class in analysis.results.classes(model):
            thr, col = thresholds.get(head_class), selectivity_column(head_class)
            if thr is not None and col in heads.columns and (heads.loc[heads["model"] == model, col] >= thr).any():
                draw("heads", f"heads_{_safe(model)}_{_safe(head_class)}.png",
                     lambda path: heads_heatmap(heads, model, head_class, thr, path))
        thr = thresholds.get(circuit_class)
        if thr is not None and selectivity_column(circuit_class) in heads.columns:
            draw("circuit", f"circuit_{_safe(model)}.png",
                 lambda path: circuit_figure(heads, model, circuit_class, thr, path, analysis.config.pr_lead.column))


def models_figure(analysis, head_class: str, path: Path) -> Path:
    """Every model's ``head_class`` fraction on one log-token axis (left) and on a normalised axis,
    the fraction of each model's training (its tokens over its last revision's, right)."""
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(9.0, 3.6), sharey=True)
    top = 0.0
    for i, model in enumerate(analysis.results.models):
        ca = _curve_or_none(analysis, model, head_class)
        if ca is None or not len(ca.curve):
            continue
        c = ca.curve
        ax.plot(c.tokens, c.fraction, "o-", ms=3, color=f"C{i}", label=model)
        bx.plot(c.tokens / c.tokens.max(), c.fraction, "o-", ms=3, color=f"C{i}", label=model)
        top = max(top, float(c.fraction.max()))
    token_axis(ax)
    share_axis(bx)
    ax.set_xlabel("training tokens")
    bx.set_xlabel("share of the model's training (to its last revision)")
    ax.set_ylabel(f"fraction of heads: {head_class}")
    fraction_axis(ax, top)
    ax.set_title(f"{head_class}: every model on one token axis")
    bx.set_title("normalised to each model's training")
    bx.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False)
    fig.tight_layout()
    return save(fig, path)


def write_figures(analysis, out_dir: Path, progress: bool = False) -> dict:
    """Write every figure under ``out_dir/figures`` (PNG, and beside it the other formats of an enclosing
    :func:`stats.plotstyle.paper_style`, e.g. PDF and SVG; by default PNG only); return {kind: [PNG paths
    relative to out_dir]}.

    A figure that cannot be drawn is skipped, never fatal: the key ``skipped`` lists
    one note per such figure (its file name and the error), which the report shows,
    and the other figures, the tables and the summary are still written.
    """
    out_dir = Path(out_dir)
    fig_dir = out_dir / "figures"
    fig_dir.mkdir(parents=True, exist_ok=True)
    made = {kind: [] for kind in ("curves", "layers", "timeline", "pr", "convergence", "continuous", "seeds", "forest",
                                  "models", "heads", "circuit", "skipped")}

    def draw(kind: str, name: str, make) -> None:
        try:
            with paper_style():
                made[kind].append(str(Path(make(fig_dir / name)).relative_to(out_dir)))
        except Exception as exc:  # a figure is an illustration: its failure must not lose the report
            plt.close("all")
            made["skipped"].append(f"{name}: {type(exc).__name__}: {exc}")

    for ca in tqdm([ca for ca in analysis.curves if has_heads(ca)], desc="figures", disable=bars_disabled(progress), leave=False):
        draw("curves", f"curve_{_safe(ca.model)}_{_safe(ca.head_class)}.png", lambda path: curve_figure(ca, path))
    fc = analysis.config.findings
    for model in analysis.results.models:
        counts = class_layer_counts(analysis.results, fc.onset_class, model)
        if not counts.empty:
            draw("layers", f"layers_{_safe(model)}.png",
                 lambda path: layers_figure(counts, model, fc.onset_class, path, fc.floor_layers))
        cont = analysis.results.continuous
        if cont is not None and not cont.empty and (cont["model"] == model).any():
            draw("continuous", f"continuous_{_safe(model)}.png", lambda path: continuous_figure(cont, model, path))
    draw("timeline", "timeline.png", lambda path: timeline_figure(analysis, path))
    tc = analysis.config.times
    if len(analysis.results.models) > 1:
        for head_class in (tc.early_class, tc.late_class):
            draw("models", f"models_{_safe(head_class)}.png", lambda path: models_figure(analysis, head_class, path))
    heads_views(analysis, draw)
    for lead in analysis.pr_lead:
        if lead.top:
            draw("pr", f"pr_{_safe(lead.model)}.png", lambda path: pr_figure(lead, path))
    if analysis.convergence:
        draw("convergence", "convergence.png", lambda path: convergence_figure(analysis.convergence, path))
    for group in getattr(analysis, "pooled", []):  # seed suites (stats/pooling.py)
        draw("seeds", f"seeds_{_safe(group.model)}.png", lambda path: seed_curves_figure(group, analysis, path))
        draw("forest", f"forest_{_safe(group.model)}.png", lambda path: forest_figure(group, path))
    return made


def _fraction_panel(ax, table, head_class: str) -> None:
    """One class's fraction against tokens, one line per model, on the log token axis of every figure."""
    column = f"{FRACTION}.{head_class}"
    for model, points in table.groupby("model", sort=False):
        points = points.dropna(subset=[column])
        ax.plot(points["tokens"], points[column], marker="o", markersize=3.5, linewidth=1.4, label=model)
    token_axis(ax)
    top = table[column].max() if column in table else 0.0
    ax.set_ylim(0.0, max(0.05, 1.12 * float(top if np.isfinite(top) else 0.0)))
    ax.set_title(head_class, fontsize=PARENT_FONT_PT)
    ax.set_xlabel("training tokens (log)", fontsize=PARENT_SMALL_PT)
    ax.set_ylabel("fraction of heads flagged", fontsize=PARENT_SMALL_PT)
    ax.tick_params(labelsize=PARENT_SMALL_PT)
    ax.grid(True, which="major", alpha=0.3)


def _save_parent(fig, dropped, rect, path: Path) -> Path:
    """Save a parent run's figure at ``path`` (laid out in ``rect``), noting the revisions at 0 tokens
    that it leaves out (``dropped``)."""
    if not dropped.empty:
        names = ", ".join(sorted(set(dropped["revision"])))
        fig.text(0.01, 0.005, f"not drawn (0 tokens cannot sit on a log axis): {names}", fontsize=PARENT_SMALL_PT,
                 ha="left", va="bottom")
    fig.tight_layout(rect=rect)
    fig.savefig(path, dpi=150)
    plt.close(fig)
    return path


def fraction_figures(table, folder: Path) -> list:
    """The figures of a parent run (a job's or a sweep's screened revisions, before any analysis:
    :func:`emergence.parent_run.curve_table`), and ``curves.csv``, the points drawn, written into
    ``folder``; returns the files written. ``table``: one row per (model, revision) with ``model``,
    ``revision``, ``tokens`` and ``fraction.<class>`` columns. ``fractions.png`` has one panel per
    class, ``fraction.<class>.png`` that class alone, larger; a revision at 0 tokens cannot sit on
    the log axis and is left out, as the figure says."""
    folder.mkdir(parents=True, exist_ok=True)
    written = [folder / "curves.csv"]
    table.to_csv(written[0], index=False)
    drawn, dropped = table[table["tokens"] > 0], table[table["tokens"] <= 0]
    classes = [c.split(".", 1)[1] for c in table.columns if c.startswith(f"{FRACTION}.")]
    if drawn.empty or not classes:
        return written
    n_models = drawn["model"].nunique()
    cols = min(3, len(classes))
    rows = -(-len(classes) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 2.9 * rows + 0.6), squeeze=False)
    for ax, head_class in zip(axes.flat, classes):
        _fraction_panel(ax, drawn, head_class)
    for ax in list(axes.flat)[len(classes):]:
        ax.set_visible(False)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.suptitle("Fraction of heads flagged per class against training tokens", fontsize=PARENT_FONT_PT + 1, y=0.99)
    fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.955), ncol=min(n_models, 4),
               fontsize=PARENT_SMALL_PT, frameon=False)
    written.append(_save_parent(fig, dropped, (0, 0.03, 1, 0.91), folder / "fractions.png"))
    for head_class in classes:
        fig, ax = plt.subplots(figsize=(6.0, 3.8))
        _fraction_panel(ax, drawn, head_class)
        ax.set_title(f"{head_class}: fraction of heads flagged against training tokens", fontsize=PARENT_FONT_PT)
        ax.legend(fontsize=PARENT_SMALL_PT, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
        written.append(_save_parent(fig, dropped, (0, 0.04, 1, 1), folder / f"{FRACTION}.{head_class}.png"))
    return written
