"""The house style of the suite's figures: readable in a paper, the same everywhere.

- text at least :data:`MIN_FONT` (8) points, in every figure (:func:`paper_style`);
- log-token axes labelled as people write token counts (``23B``, ``1.35T``, not
  ``2.3e+10``: :func:`token_axis`, :func:`format_tokens`);
- fractions on ``[0, 1]`` or ``[0, max]``, never below zero (:func:`fraction_axis`);
- saved tight (no clipped label) as PNG and, beside it, PDF and SVG
  (:data:`FORMATS`, :func:`save`): the report links the PNG, a paper takes the
  vector files.
"""

from __future__ import annotations

import logging
import math
from contextlib import contextmanager
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # noqa: E402

from stats.units import format_tokens  # noqa: E402,F401  (re-exported for the figures)

logging.getLogger("fontTools").setLevel(logging.WARNING)  # its font subsetting logs INFO lines for every PDF

#: The smallest text in a figure, in points.
MIN_FONT = 8
#: The formats every figure is written in; the first is the one the report shows.
FORMATS = ("png", "pdf", "svg")

_STYLE = {
    "font.size": 9, "axes.titlesize": 9, "axes.labelsize": 9, "xtick.labelsize": MIN_FONT, "ytick.labelsize": MIN_FONT,
    "legend.fontsize": MIN_FONT, "figure.titlesize": 10, "savefig.dpi": 150, "svg.fonttype": "none", "pdf.fonttype": 42,
}


@contextmanager
def paper_style():
    """Matplotlib settings of every figure of the suite (module docstring)."""
    with plt.rc_context(_STYLE):
        yield


class ReadableLogLocator(LogLocator):
    """Major ticks of a log axis: at powers of ten, and also at 2x and 5x when the visible range
    spans fewer than :attr:`NARROW_DECADES` decades (a toy's 0.4M-4M axis then reads 500K, 1M,
    2M instead of a single 1M)."""

    NARROW_DECADES = 2.0

    def __init__(self):
        super().__init__(base=10)

    def tick_values(self, vmin, vmax):
        lo, hi = sorted((vmin, vmax))
        narrow = lo > 0 and math.log10(hi / lo) < self.NARROW_DECADES
        self.set_params(subs=[1.0, 2.0, 5.0] if narrow else [1.0])
        return super().tick_values(vmin, vmax)


def token_axis(ax, axis: str = "x") -> None:
    """A log-scaled token axis labelled like ``10B`` (:class:`ReadableLogLocator`)."""
    a = ax.xaxis if axis == "x" else ax.yaxis
    (ax.set_xscale if axis == "x" else ax.set_yscale)("log")
    a.set_major_locator(ReadableLogLocator())
    a.set_major_formatter(FuncFormatter(lambda v, _: format_tokens(v)))
    a.set_minor_formatter(NullFormatter())


def share_axis(ax) -> None:
    """A log-scaled x axis of shares (of training), labelled as percentages: ``1%``, ``100%``."""
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(ReadableLogLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{100 * v:.3g}%"))
    ax.xaxis.set_minor_formatter(NullFormatter())


def fraction_axis(ax, top: float) -> None:
    """A fraction axis from 0 (never below) to a little above ``top`` (at most 1.02)."""
    ax.set_ylim(0.0, min(1.02, max(0.05, 1.1 * float(top))))


def save(fig, path, formats=FORMATS) -> Path:
    """Write ``fig`` tight (no clipped label) as ``path`` in each of ``formats`` (same stem); close it
    and return the path of the first format."""
    path = Path(path)
    out = [path.with_suffix(f".{ext}") for ext in formats]
    for p in out:
        fig.savefig(p, bbox_inches="tight", pad_inches=0.05)
    plt.close(fig)
    return out[0]
