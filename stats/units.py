"""Numbers as the report writes them: token counts as people write them (``23B``, ``1.35T``,
``537M``), one formatter for the report, the stories and the figures' axes; other numbers with
``-`` for a missing one."""

from __future__ import annotations

import math

#: Beyond any training run: plain scientific notation, never ``1.67e+06T``.
TOKENS_SCIENTIFIC = 1e15


def format_tokens(t) -> str:
    """``23B``, ``1.35T``, ``537M``, ``2.1K``, ``-`` for a missing value; plain scientific
    notation from :data:`TOKENS_SCIENTIFIC` up."""
    if t is None:
        return "-"
    t = float(t)
    if not math.isfinite(t):
        return "-"
    if abs(t) >= TOKENS_SCIENTIFIC:
        return f"{t:.3g}"
    for unit, div in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(t) >= div:
            return f"{t / div:.3g}{unit}"
    return f"{t:.3g}"


def format_number(v, fmt: str = "{:.3g}") -> str:
    """``v`` in ``fmt``; ``-`` for None or a float that is not finite."""
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-"
    return fmt.format(v)
