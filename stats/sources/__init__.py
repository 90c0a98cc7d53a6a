"""Where ``stats`` reads its curves from: one module per source kind, and their registry.

A source kind (``source.kind``) is one way to read tracked results into a
:class:`stats.tracked.TrackedResults`. Each module of this package defines one, as
``SOURCE = Source(...)``; the table :data:`SOURCES` (a
:class:`~emergence.common.plugins.Registry`, as every plug-in table) discovers them on first use,
and :func:`register` adds one from elsewhere.
Everything that knows the kinds reads this registry: the schema's choices of
``source.kind`` (:mod:`stats.config`), ``python -m stats --help``, :func:`read_source`.

``source=xu2026`` is no kind of its own: it is the bundled per-head file read as
``heads_csv`` (``conf/source/xu2026.yaml``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Optional

import pandas as pd

from emergence.common.plugins import Registry, package_entries
from stats.errors import StatsError


@dataclass(frozen=True)
class Source:
    """One source kind.

    kind: the name in ``source.kind``.
    read: ``read(src) -> TrackedResults`` for a ``SourceConfig`` ``src`` (already checked).
    check: ``check(src)`` raises :class:`StatsError` (one line) when a setting the kind
        needs is missing; called by the command line's checks and by :func:`read_source`.
    logged: ``logged(src, results) -> {param: value}``, what the analysis's MLflow run
        records of the source (besides ``source.kind``).
    store_key: the setting that names a tracking store the kind reads (checked before
        anything is read, :func:`stats.api.check_stores`), or None.
    order: position in the lists of kinds (ties: name).
    """

    kind: str
    read: Callable[[Any], Any]
    check: Callable[[Any], None] = lambda src: None
    logged: Callable[[Any, Any], Mapping] = lambda src, results: {}
    store_key: Optional[str] = None
    order: int = 1000

    @property
    def name(self) -> str:
        """The kind, as the registry names its entries."""
        return self.kind


def _discover(table: Registry) -> None:
    """Import every module of this package and register its ``SOURCE``."""
    for source in package_entries(__name__, __path__, "SOURCE", Source):
        table.register(source)


#: The source kinds (``source.kind``), in order (``order``, then kind).
SOURCES = Registry("source.kind", discover=_discover, order=lambda s: (s.order, s.kind), error=StatsError)
#: Add a source kind (or, with ``replace``, swap the one of that kind); returns it.
register = SOURCES.register
#: Remove a source kind (a test's own, after the test).
unregister = SOURCES.unregister
#: The source of that kind; :class:`StatsError` naming the valid ones otherwise.
get = SOURCES.get
#: The registered source kinds, in order: the choices of ``source.kind``.
kinds = SOURCES.names


def read_source(src):
    """Read the configured source (a ``SourceConfig``) into a :class:`~stats.tracked.TrackedResults`."""
    source = get(src.kind)
    source.check(src)
    return source.read(src)


def needs_path(src) -> None:
    """The check of a kind that reads a file: ``source.path`` must be set."""
    if not src.path:
        raise StatsError(f"source={src.kind} needs source.path=FILE")


def path_logged(src, results) -> dict:
    """What the analysis's run logs of a file source: the file read."""
    return {"source.path": results.source.get("path")}


def resolved(path) -> Path:
    """A configured file path, absolute."""
    return Path(path).expanduser().resolve()


def read_table(path: Path, missing: str, unreadable: str) -> pd.DataFrame:
    """A CSV file (``.gz`` too) as a DataFrame; a missing or unreadable file is one
    :class:`StatsError` line naming it (``missing`` / ``unreadable``: what each message calls it).
    Only an empty cell is missing: ``nan``, ``NA`` and the like written out stay text, so a
    numeric column holding them is refused by the checks rather than read as "not measured"."""
    if not path.is_file():
        raise StatsError(f"no such {missing}: {str(path)!r} (source.path must name an existing file)")
    try:
        return pd.read_csv(path, keep_default_na=False, na_values=[""])
    except Exception as exc:  # pandas raises several types for unreadable files
        raise StatsError(f"cannot read {unreadable} {str(path)!r}: {exc}") from None
