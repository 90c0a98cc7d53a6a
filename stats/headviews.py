"""Per-head views: circuits are a handful of heads, so their heads are the result.

- ``heads_<model>_<class>.png``: a heatmap of the selectivity of every head that
  ever crosses the class's threshold (rows, ordered by the revision at which each
  first crosses, then by layer and head), over the revisions (columns, labelled in
  tokens), on a log colour scale whose bar marks the threshold; a cell at or above
  the threshold carries a dot. At most :data:`MAX_ROWS` heads (the first to cross);
  the title says how many more there are.
- ``circuit_<model>.png``: small multiples of the final circuit (the heads of the
  circuit class at the final revision, at most :data:`MAX_PANELS`): each head's
  selectivity against tokens (log-log) with the threshold line, and its
  participation ratio on a second axis when the table has one.

Needs a per-head table (``heads.csv`` of the runs, or a ``heads_csv`` file).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import LogNorm

from emergence.common.contract import selectivity_column
from stats.plotstyle import format_tokens, save, token_axis

#: Rows of a heads heatmap at most (the heads that cross first).
MAX_ROWS = 48
#: Panels of the circuit small multiples at most.
MAX_PANELS = 12


def crossing_heads(heads, model: str, head_class: str, threshold: float):
    """``(grid, labels, tokens, more)``: the selectivity (heads x revisions) of the heads of ``model``
    that ever reach ``threshold`` for ``head_class``, ordered by first crossing."""
    col = selectivity_column(head_class)
    h = heads[heads["model"] == model]
    grid = h.pivot_table(index=["layer", "head"], columns="tokens", values=col, aggfunc="max").sort_index(axis=1)
    grid = grid.loc[:, [t for t in grid.columns if t > 0]]
    crossed = (grid >= threshold).to_numpy()
    ever = crossed.any(1)
    first = np.where(ever, crossed.argmax(1), crossed.shape[1])
    order = sorted(np.flatnonzero(ever), key=lambda i: (first[i], grid.index[i]))
    more = max(0, len(order) - MAX_ROWS)
    order = order[:MAX_ROWS]
    labels = [f"L{layer}H{head}" for layer, head in grid.index[order]]
    return grid.to_numpy(float)[order], labels, np.asarray(grid.columns, float), more


def heads_heatmap(heads, model: str, head_class: str, threshold: float, path: Path) -> Path:
    """The heads heatmap of one model and class (module docstring)."""
    grid, labels, tokens, more = crossing_heads(heads, model, head_class, threshold)
    if not labels:
        raise ValueError(f"no {head_class} head of {model} reaches {threshold:g}x")
    vals = np.where(np.isfinite(grid) & (grid > 0), grid, np.nan)
    lo = max(np.nanmin(vals), 1e-2) if np.isfinite(vals).any() else 0.1
    hi = max(np.nanmax(vals), threshold * 1.5) if np.isfinite(vals).any() else threshold * 2
    fig, ax = plt.subplots(figsize=(max(4.5, 0.55 * len(tokens) + 2.5), max(2.2, 0.22 * len(labels) + 1.4)))
    im = ax.imshow(vals, aspect="auto", cmap="magma", norm=LogNorm(vmin=lo, vmax=hi), interpolation="nearest")
    r, c = np.nonzero(vals >= threshold)
    ax.plot(c, r, ".", color="#38d", ms=3.5, label=f">= {threshold:g}x")
    ax.set_xticks(range(len(tokens)), labels=[format_tokens(t) for t in tokens], rotation=45, ha="right")
    ax.set_yticks(range(len(labels)), labels=labels)
    ax.set_xlabel("training tokens (revision)")
    ax.set_ylabel("head (first to cross at the top)")
    title = f"{model}: {head_class} selectivity of the {len(labels)} heads that reach {threshold:g}x"
    ax.set_title(title + (f" (+{more} more not shown)" if more else ""))
    bar = fig.colorbar(im, ax=ax, label=f"selectivity.{head_class} (x over a uniform head)")
    bar.ax.axhline(threshold, color="#38d", lw=2)
    ax.legend(loc="upper left", bbox_to_anchor=(1.25, 1.0), frameon=False)
    return save(fig, path)


def circuit_figure(heads, model: str, head_class: str, threshold: float, path: Path, pr_column: str = "pr") -> Path:
    """Small multiples of the final circuit of ``model`` (module docstring)."""
    col = selectivity_column(head_class)
    h = heads[(heads["model"] == model) & (heads["tokens"] > 0)]
    final = h[h["tokens"] == h["tokens"].max()]
    circuit = final[final[col] >= threshold].sort_values(col, ascending=False)[["layer", "head"]].to_numpy().tolist()
    if not circuit:
        raise ValueError(f"{model} has no {head_class} head at or above {threshold:g}x at its final revision")
    circuit = circuit[:MAX_PANELS]
    ncol = min(4, len(circuit))
    nrow = int(np.ceil(len(circuit) / ncol))
    fig, axes = plt.subplots(nrow, ncol, figsize=(2.6 * ncol + 0.6, 2.2 * nrow + 0.6), squeeze=False, sharex=True)
    has_pr = pr_column in h.columns and h[pr_column].notna().any()
    for ax, (layer, head) in zip(axes.flat, circuit):
        g = h[(h["layer"] == layer) & (h["head"] == head)].sort_values("tokens")
        ax.plot(g["tokens"], g[col].clip(lower=1e-2), "o-", ms=3, color="C0", label="selectivity")
        ax.axhline(threshold, color="C0", ls=":", lw=1)
        ax.set_yscale("log")
        token_axis(ax)
        ax.set_title(f"L{layer}H{head}")
        if has_pr:
            ax2 = ax.twinx()
            ax2.plot(g["tokens"], g[pr_column], "s--", ms=2.5, color="C1", lw=1, label="PR")
            ax2.tick_params(axis="y", colors="C1")
    for ax in list(axes.flat)[len(circuit):]:
        ax.axis("off")
    fig.supxlabel("training tokens")
    fig.supylabel(f"selectivity.{head_class} (dotted: {threshold:g}x)")
    if has_pr:
        fig.text(1.0, 0.5, f"{pr_column} (orange)", rotation=90, va="center", ha="left", color="C1")
    fig.suptitle(f"{model}: the final {head_class} circuit ({len(circuit)} heads at >= {threshold:g}x)")
    fig.tight_layout()
    return save(fig, path)
