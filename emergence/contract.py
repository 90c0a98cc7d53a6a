"""The written contract between screening (``emergence``) and statistics (``stats``).

Both sides import this module; it imports neither (no model code, no torch), so
``stats`` can read what ``emergence`` writes without importing the model code.

Store layout. A study's MLflow store holds everything it produced: with a local
store (``sqlite:///DIR/NAME.db`` or a ``file:`` folder) the runs' artifacts live
beside it, in ``DIR/mlartifacts/<experiment>/``, whatever the working directory and
wherever the checkout is; so the folder ``DIR`` can be moved or handed on whole
(the artifact locations recorded in the store are absolute: after a move, see the
README's "Moving a study"). With a tracking server (``http(s)://``) the server's own
artifact destination (``mlflow server --artifacts-destination``) is used.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional
from urllib.parse import unquote, urlparse

#: Name of the artifact folder beside a local store.
ARTIFACTS_DIR = "mlartifacts"


def sqlite_file(tracking_uri: str) -> Optional[Path]:
    """The database file of a ``sqlite:///`` URI, absolute; None for anything else."""
    if tracking_uri.startswith("sqlite:///"):
        return Path(unquote(tracking_uri[len("sqlite:///"):].split("?")[0])).expanduser().resolve()
    return None


def local_store_dir(tracking_uri: str) -> Optional[Path]:
    """The folder of a local store (the SQLite file's folder, or the ``file:`` store
    folder itself), absolute; None for a tracking server or another database."""
    if tracking_uri.startswith("sqlite:///"):
        return sqlite_file(tracking_uri).parent
    if tracking_uri.startswith("file:"):
        return Path(unquote(urlparse(tracking_uri).path)).expanduser().resolve()
    if "://" not in tracking_uri:  # a bare path is a file store
        return Path(tracking_uri).expanduser().resolve()
    return None


def artifact_location(tracking_uri: str, experiment: str, artifacts: Optional[str] = None) -> Optional[str]:
    """The artifact location (a URI) for a new experiment of a store.

    ``artifacts`` (the ``tracking.artifacts`` setting) wins when given; else a local
    store keeps them in ``<store folder>/mlartifacts/<experiment>``; else (a server)
    None, which lets the server choose its artifact destination.
    """
    if artifacts:
        root = Path(artifacts).expanduser().resolve()
    else:
        store = local_store_dir(tracking_uri)
        if store is None:
            return None
        root = store / ARTIFACTS_DIR
    location = root / experiment
    location.mkdir(parents=True, exist_ok=True)
    return location.as_uri()


def relocate_store(db_file: str, old_folder: str) -> int:
    """After a local SQLite store's folder was moved or copied from ``old_folder``,
    point its recorded artifact locations at the folder the database is in now.

    MLflow records absolute artifact URIs (``file:///old/mlartifacts/...``) per
    experiment and per run; this rewrites that prefix to the database's current
    folder. Returns the number of rows changed. Standard library only.
    """
    import sqlite3

    db = Path(db_file).expanduser().resolve()
    if not db.is_file():
        raise FileNotFoundError(f"no SQLite store at {str(db)!r}")
    old = Path(old_folder).expanduser().resolve(strict=False).as_uri()
    new = db.parent.as_uri()
    if old == new:
        return 0
    with sqlite3.connect(db) as con:
        changed = 0
        for table, column in (("experiments", "artifact_location"), ("runs", "artifact_uri")):
            cur = con.execute(f"UPDATE {table} SET {column} = ? || substr({column}, ?) WHERE {column} LIKE ?",
                              (new, len(old) + 1, old + "/%"))
            changed += cur.rowcount
    return changed


def _main(argv=None) -> int:
    import argparse
    import sys

    parser = argparse.ArgumentParser(
        prog="python -m emergence.contract",
        description="Point a moved SQLite store's artifact locations at its new folder.")
    parser.add_argument("command", choices=["relocate"])
    parser.add_argument("store", help="the store's database file in its new place, e.g. /new/study/mlflow.db")
    parser.add_argument("--from", dest="old", required=True, help="the folder the store was in before")
    args = parser.parse_args(argv)
    try:
        n = relocate_store(args.store, args.old)
    except FileNotFoundError as exc:
        print(f"emergence: error: {exc}", file=sys.stderr)
        return 2
    print(f"relocated {n} artifact location(s) to {Path(args.store).expanduser().resolve().parent}")
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())
