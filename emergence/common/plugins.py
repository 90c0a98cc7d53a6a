"""The plug-in tables of the project: one :class:`Registry` class, and the discovery of one-file plug-ins.

Every table of named entries (head classes, architecture families, model sources, statistics
sources, corpus kinds, screen recipes) is a :class:`Registry`: discovery on first use, its names
(the schema's choices and ``--help`` read them), lookup with one line naming the choices. A
registry package holds one module per entry, each defining its entry as a module-level name
(``HEAD_CLASS``, ``FAMILY``, ``SOURCE``); :func:`package_entries` imports them and returns the
entries, so each registry only says what it registers; :func:`external_entries` adds user code's.
Standard library only: importing a registry must not import torch.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Iterable, List


def package_entries(package: str, path: Iterable[str], attribute: str, kind: type) -> List:
    """The ``attribute`` of every module of ``package`` (at ``path``; names starting with
    ``_`` skipped), in module-name order, that is an instance of ``kind``."""
    entries = []
    for info in sorted(pkgutil.iter_modules(path), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        entry = getattr(importlib.import_module(f"{package}.{info.name}"), attribute, None)
        if isinstance(entry, kind):
            entries.append(entry)
    return entries


#: Environment variable naming modules of user code (comma-separated, importable from
#: ``sys.path`` or the working folder) whose ``FAMILY`` / ``SOURCE`` are registered too.
PLUGINS_VARIABLE = "EMERGENCE_PLUGINS"


def external_entries(group: str, attribute: str, kind: type) -> List:
    """Entries from user code, without editing the package: the Python entry points of
    ``group`` (``[project.entry-points."emergence.families"] mine = "my_pkg.family:FAMILY"``;
    an entry point may name the entry itself or a module holding ``attribute``), then the
    ``attribute`` of each module named in ``$EMERGENCE_PLUGINS``."""
    import os
    import sys
    from importlib.metadata import entry_points

    entries = []
    for point in sorted(entry_points(group=group), key=lambda p: p.name):
        loaded = point.load()
        entries.append(getattr(loaded, attribute, loaded))
    names = [n.strip() for n in os.environ.get(PLUGINS_VARIABLE, "").split(",") if n.strip()]
    if names and os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())
    for name in names:
        entries.append(getattr(importlib.import_module(name), attribute, None))
    return [e for e in entries if isinstance(e, kind)]


class Registry:
    """A table of plug-ins by name, the one mechanism behind every table of the project.

    - ``what``: what an entry is, for messages ("family", "corpus kind");
    - ``discover``: called with the table once, on first use, to register the built-in entries;
    - ``lazy``: ``{name: "module:attribute"}``, entries imported on first lookup, so that a
      schema offers their names as its choices without importing what they need (torch);
    - ``check(entry, table)``: refuses a malformed entry (raises) before it is added;
    - ``order``: the sort key of :meth:`entries` and :meth:`names` (default: the order of
      declaration and registration);
    - ``error``: the exception a failed lookup or a clash raises, one line naming the choices."""

    def __init__(self, what: str, *, discover=None, lazy=None, check=None, order=None, error=KeyError):
        self.what, self.error = what, error
        self._discover, self._check, self._order = discover, check, order
        self._lazy = dict(lazy or {})
        #: name -> entry, in declaration and registration order (a lazy entry's value is set on loading)
        self._entries: dict = dict.fromkeys(self._lazy)
        self._discovered = discover is None

    def _ensure(self) -> None:
        if not self._discovered:
            self._discovered = True
            self._discover(self)

    def register(self, entry, replace: bool = False):
        """Add ``entry`` under its ``name`` (``replace``: over one of the same name); returns it,
        so that a module can write ``ENTRY = TABLE.register(...)``."""
        self._ensure()
        name = entry.name
        if self._check is not None:
            self._check(entry, self)
        taken = name in self._entries and name not in self._lazy and self._entries[name] is not entry
        if taken and not replace:
            raise self.error(f"{self.what} {name!r} is registered already; pass replace=True to swap it")
        self._entries[name] = entry
        self._lazy.pop(name, None)
        return entry

    def unregister(self, name: str) -> None:
        """Remove an entry (a test's own, after the test)."""
        self._entries.pop(name, None)
        self._lazy.pop(name, None)

    def entries(self) -> dict:
        """``{name: entry}`` of every entry (lazy ones imported), in the table's order."""
        self._ensure()
        for name in list(self._lazy):
            self._load(name)
        if self._order is None:
            return dict(self._entries)
        return {n: self._entries[n] for n in sorted(self._entries, key=lambda n: self._order(self._entries[n]))}

    def names(self) -> tuple:
        """The names in the table's order (without importing lazy entries, where the table has no order)."""
        self._ensure()
        return tuple(self._entries) if self._order is None else tuple(self.entries())

    def __contains__(self, name) -> bool:
        self._ensure()
        return isinstance(name, str) and name in self._entries  # (a value that is no name, a list, is in none)

    def get(self, name):
        """The entry called ``name``; ``error`` naming the valid choices otherwise."""
        self._ensure()
        if isinstance(name, str) and name in self._lazy:
            self._load(name)
        try:
            return self._entries[name]
        except (KeyError, TypeError):
            raise self.error(f"unknown {self.what} {name!r}; valid: {', '.join(self.names())}") from None

    def _load(self, name: str) -> None:
        module, _, attribute = self._lazy[name].partition(":")
        self._entries[name] = getattr(importlib.import_module(module), attribute)
        del self._lazy[name]
