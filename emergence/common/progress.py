"""Progress as people read it: bars on a terminal, one line per stage in a log.

A progress bar redrawn in a log file (a batch job's output, ``> log 2>&1``) leaves a line per
update there (over 1,200 for the default job); so every bar of both apps is drawn only when
stderr is a terminal (:func:`bars_disabled`, tqdm's ``disable=None``), and the stages say what
they did in one line each instead (:func:`stage_line`, printed only off a terminal).
"""

from __future__ import annotations

import contextlib
import sys
from typing import Optional


def on_terminal() -> bool:
    """Whether stderr (where the bars are drawn) is a terminal."""
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # a closed or replaced stream
        return False


def bars_disabled(progress: bool) -> Optional[bool]:
    """tqdm's ``disable`` for a bar asked for by ``progress``: True when not asked for, else None
    (tqdm then draws it only on a terminal)."""
    return None if progress else True


def stage_line(text: str, progress: bool = True) -> None:
    """One line of progress for a log (stdout), where the bars are not drawn: nothing on a
    terminal (its bars say it) nor when progress is off."""
    if progress and not on_terminal():
        print(text, flush=True)


@contextlib.contextmanager
def quiet_hf_bars():
    """Hugging Face's bars off inside the block (no "Writing model shards" bar for each checkpoint:
    the training loop has its own), back on after when they were on."""
    from transformers.utils import logging as hf_logging

    shown = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if shown:
            hf_logging.enable_progress_bar()
