"""Numbers as the report writes them: token counts as people write them (``23B``, ``1.35T``,
``537M``), one formatter for the report, the stories and the figures' axes; other numbers with
``-`` for a missing one; and the *units* of a per-head column, with its thresholds written in them.

Units of a per-head column (``source.units.<class>``, :data:`UNITS`):

- ``ratio``: a selectivity, x over a uniform head (the project's screens and the reference
  study): any value >= 0, a threshold > 0, written ``30x``;
- ``score``: a score or an attention mass in [0, 1] (another lab's prefix-matching scores,
  first-token attention masses): a threshold in (0, 1], written ``0.4``.

``auto`` (the default) is the source's own unit where it has one (a run's ``heads.csv`` holds
selectivities: ``ratio``), else read from the values of the table's undeclared columns together: all
in [0, 1] are ``score`` s, any value above 1 makes them ``ratio`` s (:func:`detect_unit`,
:func:`stats.heads.resolve_units`). A threshold outside its column's range (30 for a score) is
refused in one line (:func:`threshold_problem`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import numpy as np

from emergence.common.units import format_tokens  # noqa: F401  (the one token formatter, re-exported)

#: ``source.units.<class>``: decide the unit from the source, then from the values.
AUTO = "auto"

#: The sign written before a value that is a bound (a ``bound`` of ``"lower"`` / ``"upper"``):
#: ``>= 1.67``, ``<= 0.4``; ``BOUND_SIGN.get(bound, "")`` for a value that may be a point.
BOUND_SIGN = {"lower": ">= ", "upper": "<= "}


def format_number(v, fmt: str = "{:.3g}") -> str:
    """``v`` in ``fmt``; ``-`` for None or a float that is not finite."""
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-"
    return fmt.format(v)


@dataclass(frozen=True)
class Unit:
    """What a per-head column measures: its name, its words, how a value is written, its range."""

    name: str
    #: the unit in words, for the report's header and the figures' labels
    description: str
    #: written after a value: ``x`` for a ratio, nothing for a score
    suffix: str
    #: the largest valid threshold (None: unbounded)
    upper: Optional[float]
    #: the field of ``analysis.sensitivity`` holding this unit's threshold grid
    grid_key: str

    def format(self, value) -> str:
        """A threshold or a value in this unit: ``30x``, ``0.4``; ``-`` for a missing one."""
        return format_number(value, "{:g}" + self.suffix)

    def admits(self, value) -> bool:
        """Whether ``value`` is a valid threshold of this unit (> 0, finite, <= ``upper``)."""
        try:
            v = float(value)
        except (TypeError, ValueError):
            return False
        return math.isfinite(v) and v > 0 and (self.upper is None or v <= self.upper)

    def to_dict(self) -> dict:
        return {"unit": self.name, "description": self.description, "suffix": self.suffix, "upper": self.upper}


RATIO = Unit("ratio", "selectivity, x over a uniform head", "x", None, "grid")
SCORE = Unit("score", "score or mass in [0, 1]", "", 1.0, "score_grid")
#: The units by name: the choices of ``source.units.<class>`` (with ``auto``).
UNITS = {u.name: u for u in (RATIO, SCORE)}
UNIT_CHOICES = (AUTO,) + tuple(UNITS)


def get_unit(name: Optional[str]) -> Unit:
    """The unit of that name (None: ``ratio``, the project's)."""
    return RATIO if name is None else UNITS[name]


def detect_unit(values) -> Unit:
    """``score`` when every finite value lies in [0, 1] (and there is one), else ``ratio``."""
    v = np.asarray(values, float)
    v = v[np.isfinite(v)]
    return SCORE if v.size and float(v.min()) >= 0 and float(v.max()) <= 1 else RATIO


def format_threshold(value, unit: Optional[str] = None) -> str:
    """A threshold written in its unit's terms: ``30x`` (ratio, the default), ``0.4`` (score)."""
    return get_unit(unit).format(value)


def threshold_problem(key: str, value, head_class: str, unit: str, why: str = "") -> Optional[str]:
    """The one line refusing ``key=value`` as a threshold of ``head_class`` (unit ``unit``), or None."""
    u = get_unit(unit)
    if u.admits(value):
        return None
    valid = "a finite number > 0" if u.upper is None else f"in (0, {u.upper:g}]"
    return (f"{key}={value!r}: outside the range of {head_class}'s values, a {u.description}{why}; "
            f"a {u.name} threshold must be {valid}")
