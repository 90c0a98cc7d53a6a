"""Writing a file or a folder whole or not at all: to a temporary name beside it, then a rename."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Callable


def tmp_name(path: Path) -> Path:
    """Where :func:`write_atomic` writes ``path`` first: ``.tmp-<name>-<pid>`` beside it."""
    return path.with_name(f".tmp-{path.name}-{os.getpid()}")


def write_atomic(path: Path, write: Callable[[Path], None]) -> None:
    """Write the file or folder ``path`` through ``write(temporary path)`` and a rename: a file is
    synced to disk first; a folder already at ``path`` (left by a process that died after its rename)
    is replaced. Errors are raised as they come; the caller decides what a partial write leaves."""
    tmp = tmp_name(path)
    write(tmp)
    if tmp.is_dir() and path.exists():
        shutil.rmtree(path)
    elif not tmp.is_dir():
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
    os.replace(tmp, path)
