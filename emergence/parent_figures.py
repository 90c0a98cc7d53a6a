"""Figures of a parent run: each head class's fraction against training tokens, one line per model.

Drawn from the screened revisions of a job or a sweep (:func:`curve_table`) into a folder
(:func:`draw`), which emergence/parent_run.py logs as the parent run's ``curves/``:

- ``fractions.png``: one panel per head class (fraction of heads flagged against tokens),
- ``fraction.<class>.png``: that class alone, larger,
- ``curves.csv``: the points drawn (model, revision, tokens, the fractions).

The token axis is logarithmic (checkpoints are log-spaced) with labels in tokens (``23B``,
``1.2M``); a revision at 0 tokens (``step0``) cannot sit on it and is left out, as the figure
says. Fractions are drawn from 0. Text is 8 pt or larger.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, List

import pandas as pd

from emergence.contract import FRACTION, parse_metric

FONT_PT = 9
SMALL_PT = 8


def curve_table(results: Iterable) -> pd.DataFrame:
    """One row per screened revision with metrics (``RevisionResult``): ``model`` (its label, the
    seed included for a seed suite), ``revision``, ``tokens`` and every ``fraction.<class>``."""
    rows = []
    for r in results:
        if not r.metrics:
            continue  # held by another sweep: no metrics here
        row = {"model": getattr(r, "label", "") or r.model, "revision": r.revision.name, "tokens": int(r.revision.tokens)}
        row.update({k: float(v) for k, v in r.metrics.items() if (p := parse_metric(k)) is not None and p.kind == FRACTION})
        rows.append(row)
    table = pd.DataFrame(rows)
    if table.empty:
        return table
    return table.drop_duplicates(["model", "revision"], keep="last").sort_values(["model", "tokens"]).reset_index(drop=True)


def classes_of(table: pd.DataFrame) -> List[str]:
    return [c.split(".", 1)[1] for c in table.columns if c.startswith(f"{FRACTION}.")]


def _panel(ax, table: pd.DataFrame, head_class: str) -> None:
    """One class's fraction against tokens, one line per model, on the log token axis of every figure
    (emergence/contract/tokenaxis.py)."""
    from emergence.contract.tokenaxis import token_axis  # (matplotlib: only when figures are drawn)

    column = f"{FRACTION}.{head_class}"
    for model, points in table.groupby("model", sort=False):
        points = points.dropna(subset=[column])
        ax.plot(points["tokens"], points[column], marker="o", markersize=3.5, linewidth=1.4, label=model)
    token_axis(ax)
    top = table[column].max() if column in table else 0.0
    ax.set_ylim(0.0, max(0.05, 1.12 * float(top if pd.notna(top) else 0.0)))
    ax.set_title(head_class, fontsize=FONT_PT)
    ax.set_xlabel("training tokens (log)", fontsize=SMALL_PT)
    ax.set_ylabel("fraction of heads flagged", fontsize=SMALL_PT)
    ax.tick_params(labelsize=SMALL_PT)
    ax.grid(True, which="major", alpha=0.3)


def _note(fig, dropped: pd.DataFrame) -> None:
    if not dropped.empty:
        names = ", ".join(sorted(set(dropped["revision"])))
        fig.text(0.01, 0.005, f"not drawn (0 tokens cannot sit on a log axis): {names}", fontsize=SMALL_PT,
                 ha="left", va="bottom")


def draw(table: pd.DataFrame, folder: Path) -> List[Path]:
    """Write the figures and ``curves.csv`` of ``table`` (:func:`curve_table`) into ``folder``;
    returns the files written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    written = [folder / "curves.csv"]
    table.to_csv(written[0], index=False)
    drawn, dropped = table[table["tokens"] > 0], table[table["tokens"] <= 0]
    classes = classes_of(table)
    if drawn.empty or not classes:
        return written
    n_models = drawn["model"].nunique()
    cols = min(3, len(classes))
    rows = -(-len(classes) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 2.9 * rows + 0.6), squeeze=False)
    for ax, head_class in zip(axes.flat, classes):
        _panel(ax, drawn, head_class)
    for ax in list(axes.flat)[len(classes):]:
        ax.set_visible(False)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.suptitle("Fraction of heads flagged per class against training tokens", fontsize=FONT_PT + 1, y=0.99)
    fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.955), ncol=min(n_models, 4),
               fontsize=SMALL_PT, frameon=False)
    _note(fig, dropped)
    fig.tight_layout(rect=(0, 0.03, 1, 0.91))
    written.append(folder / "fractions.png")
    fig.savefig(written[-1], dpi=150)
    plt.close(fig)
    for head_class in classes:
        fig, ax = plt.subplots(figsize=(6.0, 3.8))
        _panel(ax, drawn, head_class)
        ax.set_title(f"{head_class}: fraction of heads flagged against training tokens", fontsize=FONT_PT)
        ax.legend(fontsize=SMALL_PT, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
        _note(fig, dropped)
        fig.tight_layout(rect=(0, 0.04, 1, 1))
        written.append(folder / f"{FRACTION}.{head_class}.png")
        fig.savefig(written[-1], dpi=150)
        plt.close(fig)
    return written
