"""Token counts as people write them (``23B``, ``1.35T``, ``537M``): one formatter for both
apps' tables, reports and figure axes."""

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
