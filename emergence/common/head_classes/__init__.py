"""The head classes of the selectivity screen: one file per class, and their registry.

A head class is one attention pattern the screen looks for (METHODS section 5). Each
module of this package defines one, as ``HEAD_CLASS = HeadClass(...)``; the table
:data:`HEAD_CLASSES` discovers them on first use, and :func:`register` adds one from
elsewhere (a test, a user's own module). Everything that knows the classes (the reducer,
the flags and metrics, the config defaults, ``stats``) derives from this registry. How to
add a class: ``docs/head_classes.md``.

Importing this package never imports torch: a class's ``targets`` function imports
it when it is called, so ``stats`` reads names and thresholds without model code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Dict, Mapping, Tuple

from emergence.common.plugins import Registry, package_entries

#: A class name becomes part of metric and column names (``count.<name>``,
#: ``selectivity.<name>``): lower case letters, digits and underscores, no dots.
NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_]*$")


@dataclass(frozen=True)
class HeadClass:
    """One head class.

    name: the class's name in configs, metrics and tables.
    threshold: the default selectivity threshold (x over a uniform head) at which a head
        is flagged for the class; ``screen.thresholds.<name>`` and
        ``analysis.thresholds.<name>`` override it.
    excludes_key0: the key-0 policy. True (capability classes): key 0 is left out of both
        the targets and the baseline, so an attention sink on key 0 does not hide the
        pattern. False (``bos``): key 0 may be a target and is otherwise in the baseline.
    targets: ``targets(input_ids, settings) -> mask``. ``input_ids`` [B, T] (int64),
        ``settings`` the screen's options the targets may use (``local_window``); returns
        a boolean mask [B, T, T] (or [1, T, T] when the targets depend only on positions),
        ``mask[b, q, k]`` true when key k is a target of query q in sequence b. Only keys
        k <= q count; a query with no target is left out of the class. Import torch
        inside the function.
    description: T_c(q) in words, for tables and docs.
    order: position of the class in tables and reports (ties: registration order).
    """

    name: str
    threshold: float
    excludes_key0: bool
    targets: Callable[[Any, Mapping[str, Any]], Any]
    description: str = ""
    order: int = 1000


def _check(head_class: HeadClass, table) -> None:
    """Refuse a malformed name, a non-positive threshold or targets that are not a function."""
    name = head_class.name
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise ValueError(f"head class name {name!r} must match {NAME_PATTERN.pattern} (it is part of metric names)")
    if not float(head_class.threshold) > 0:
        raise ValueError(f"head class {name!r}: default threshold {head_class.threshold!r} must be > 0")
    if not callable(head_class.targets):
        raise ValueError(f"head class {name!r}: targets must be a function (input_ids, settings) -> mask")


def _discover(table: Registry) -> None:
    """Import every module of this package and register its ``HEAD_CLASS``."""
    for head_class in package_entries(__name__, __path__, "HEAD_CLASS", HeadClass):
        table.register(head_class)


#: The head classes, in report order (``order``, then registration order); a failed lookup or
#: a clash is a ``ValueError`` naming the valid classes. Its methods are this package's functions.
HEAD_CLASSES = Registry("head class", discover=_discover, check=_check, order=lambda c: c.order, error=ValueError)
register = HEAD_CLASSES.register
unregister = HEAD_CLASSES.unregister
names = HEAD_CLASSES.names
get = HEAD_CLASSES.get


def classes() -> Tuple[HeadClass, ...]:
    """Every registered class, in report order."""
    return tuple(HEAD_CLASSES.entries().values())


def default_thresholds() -> Dict[str, float]:
    """``{name: default threshold}`` of every registered class."""
    return {c.name: float(c.threshold) for c in classes()}
