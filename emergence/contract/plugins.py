"""Discovery of the one-file plug-ins of a registry package (head classes, families, sources).

A registry package holds one module per entry, each defining its entry as a module-level
name (``HEAD_CLASS``, ``FAMILY``, ``SOURCE``); :func:`package_entries` imports them and
returns the entries, so each registry only says what it registers. Standard library only:
importing a registry must not import torch.
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
