"""One log-token axis for every figure of both apps (``stats`` figures, the parent run's curves).

Imported only by figure code (it imports matplotlib): ``stats.plotstyle`` and
``stats.figures.fraction_figures``. Labels come from :func:`emergence.common.units.format_tokens`
(``500K``, ``2M``, ``23B``); the ticks from :class:`ReadableLogLocator`, which never falls back to
matplotlib's linear ticks (``3.25M3.5M3.75M4M`` on a narrow axis).
"""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")
import numpy as np  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter  # noqa: E402

from emergence.common.units import format_tokens  # noqa: E402

#: The tick multiples tried on a log axis spanning fewer than two decades, coarsest first.
NARROW_SUBS = ((1.0, 2.0, 5.0), (1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0))


def _log_ticks(lo: float, hi: float, subs) -> np.ndarray:
    """``s * 10**k`` for every ``s`` in ``subs`` and every decade around ``[lo, hi]``."""
    decades = range(math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 1)
    return np.array(sorted(s * 10.0 ** k for k in decades for s in subs))


class ReadableLogLocator(LogLocator):
    """Major ticks of a log axis: at powers of ten; on an axis spanning fewer than
    :attr:`NARROW_DECADES` decades also at 2x and 5x (a toy's 0.4M-4M axis reads 500K, 1M, 2M),
    then at every integer multiple; on an axis narrower still (3M-4M), at a few round values. At
    least two and at most :attr:`MAX_TICKS` ticks fall inside the axis: never matplotlib's
    linear fallback, whose crowded labels run into each other."""

    NARROW_DECADES = 2.0
    MAX_TICKS = 7

    def __init__(self):
        super().__init__(base=10)

    def tick_values(self, vmin, vmax):
        lo, hi = sorted((float(vmin), float(vmax)))
        if not (lo > 0 and hi > lo and math.isfinite(hi)):
            return super().tick_values(vmin, vmax)
        if math.log10(hi / lo) >= self.NARROW_DECADES:
            self.set_params(subs=[1.0])
            return super().tick_values(vmin, vmax)
        for subs in NARROW_SUBS:
            ticks = _log_ticks(lo, hi, subs)
            inside = int(((ticks >= lo) & (ticks <= hi)).sum())
            if 2 <= inside <= self.MAX_TICKS:
                return ticks
        return MaxNLocator(nbins=3, steps=[1, 2, 2.5, 5, 10]).tick_values(lo, hi)


def token_axis(ax, axis: str = "x") -> None:
    """A log-scaled token axis labelled like ``10B`` (:class:`ReadableLogLocator`)."""
    a = ax.xaxis if axis == "x" else ax.yaxis
    (ax.set_xscale if axis == "x" else ax.set_yscale)("log")
    a.set_major_locator(ReadableLogLocator())
    a.set_major_formatter(FuncFormatter(lambda v, _: format_tokens(v)))
    a.set_minor_formatter(NullFormatter())


def share_axis(ax) -> None:
    """A log-scaled x axis of shares (of training), labelled as percentages: ``1%``, ``100%``."""
    token_axis(ax)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{100 * v:.3g}%"))
