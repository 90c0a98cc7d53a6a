"""``python -m emergence.common relocate NEW_DB --from OLD_DIR``: after a local SQLite store's
folder was moved or copied, point its recorded artifact locations at its new folder
(:func:`emergence.common.store.relocate_store`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from emergence.common.store import relocate_store


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m emergence.common",
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
    raise SystemExit(main())
