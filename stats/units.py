"""Numbers as the report writes them: token counts as people write them (``23B``, ``1.35T``,
``537M``), one formatter for the report, the stories and the figures' axes; other numbers with
``-`` for a missing one."""

from __future__ import annotations

import math

from emergence.contract.units import format_tokens  # noqa: F401  (the one token formatter, re-exported)

def format_number(v, fmt: str = "{:.3g}") -> str:
    """``v`` in ``fmt``; ``-`` for None or a float that is not finite."""
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-"
    return fmt.format(v)
