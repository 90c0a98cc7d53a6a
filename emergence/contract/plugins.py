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
