"""The house style of the suite's figures: readable in a paper, the same everywhere.

- text at least :data:`MIN_FONT` (8) points, in every figure (:func:`paper_style`);
- log-token axes labelled as people write token counts (``23B``, ``1.35T``, not
  ``2.3e+10``: :func:`token_axis`, :func:`format_tokens`);
- fractions on ``[0, 1]`` or ``[0, max]``, never below zero (:func:`fraction_axis`); counts of
  heads from 0, in whole numbers (:func:`count_axis`);
- saved tight (no clipped label) as PNG, the file the report links; a paper's PDF and
  SVG beside it on request (the setting ``figures.formats``: :func:`paper_style`,
  :func:`save`).
"""

from __future__ import annotations

import logging
from contextlib import contextmanager
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402
from emergence.common.tokenaxis import share_axis, token_axis  # noqa: E402,F401  (re-exported)
from stats.units import format_tokens  # noqa: E402,F401  (re-exported for the figures)

logging.getLogger("fontTools").setLevel(logging.WARNING)  # its font subsetting logs INFO lines for every PDF

#: The smallest text in a figure, in points.
MIN_FONT = 8
#: The formats a figure is written in by default: the one the report shows.
FORMATS = ("png",)
_formats = list(FORMATS)  # the formats of the figures drawn now (paper_style)

_STYLE = {
    "font.size": 9, "axes.titlesize": 9, "axes.labelsize": 9, "xtick.labelsize": MIN_FONT, "ytick.labelsize": MIN_FONT,
    "legend.fontsize": MIN_FONT, "figure.titlesize": 10, "savefig.dpi": 150, "svg.fonttype": "none", "pdf.fonttype": 42,
}


@contextmanager
def paper_style(formats=None):
    """Matplotlib settings of every figure of the suite (module docstring); the figures saved inside
    are written in ``formats`` (PNG first whatever the order: the report shows it; None: the
    formats of an enclosing ``paper_style``, else :data:`FORMATS`)."""
    global _formats
    before = _formats
    if formats is not None:
        _formats = ["png"] + [f for f in dict.fromkeys(formats) if f != "png"]
    try:
        with plt.rc_context(_STYLE):
            yield
    finally:
        _formats = before


def fraction_axis(ax, top: float) -> None:
    """A fraction axis from 0 (never below) to a little above ``top`` (at most 1.02)."""
    ax.set_ylim(0.0, min(1.02, max(0.05, 1.1 * float(top))))


def count_axis(ax, top: float) -> None:
    """A count axis (heads) from 0 to a little above ``top``, with whole-number ticks."""
    ax.set_ylim(0.0, max(1.0, 1.1 * float(top)))
    ax.yaxis.set_major_locator(MaxNLocator(integer=True, nbins=6))


def save(fig, path) -> Path:
    """Write ``fig`` tight (no clipped label) as ``path`` in each format of the enclosing :func:`paper_style`
    (same stem); close it and return the path of the PNG."""
    out = [Path(path).with_suffix(f".{ext}") for ext in _formats]
    for p in out:
        fig.savefig(p, bbox_inches="tight", pad_inches=0.05)
    plt.close(fig)
    return out[0]
