"""What the libraries print: their warnings, not their INFO lines, unless asked (``-v``).

A job's log is for the job's own lines; MLflow's "Creating initial MLflow database tables...",
alembic's migrations and the other libraries' INFO lines are noise there. Both apps call
:func:`take_verbose_flag` on their command line and :func:`quiet_logs` before any work;
``-v`` / ``--verbose`` brings every INFO line back (passed to a sweep's jobs through :data:`VERBOSE_ENV`).
"""

from __future__ import annotations

import logging
import os
from typing import List

#: The command-line flags that bring the libraries' INFO lines back.
VERBOSE_FLAGS = ("-v", "--verbose")
#: Set (``1``) for the processes of a verbose command (a sweep's jobs run in other processes too).
VERBOSE_ENV = "EMERGENCE_VERBOSE"
#: The libraries' loggers kept at WARNING by default.
QUIET_LOGGERS = ("mlflow", "alembic", "huey", "matplotlib", "fontTools", "PIL", "urllib3", "httpx", "filelock",
                 "huggingface_hub", "transformers", "git", "numexpr")


def take_verbose_flag(argv: List[str]) -> bool:
    """Remove the verbose flags from ``argv`` (in place; Hydra would refuse them) and say whether one
    was there; also true when :data:`VERBOSE_ENV` is set."""
    flagged = any(a in VERBOSE_FLAGS for a in argv)
    argv[:] = [a for a in argv if a not in VERBOSE_FLAGS]
    if flagged:
        os.environ[VERBOSE_ENV] = "1"
    return verbose()


def verbose() -> bool:
    return os.environ.get(VERBOSE_ENV, "") not in ("", "0", "false")


def quiet_logs(loud: bool = False) -> None:
    """The libraries' loggers at WARNING (at INFO when ``loud``); MLflow's level by its variable too."""
    level = logging.INFO if loud else logging.WARNING
    if loud:
        os.environ["MLFLOW_LOGGING_LEVEL"] = "INFO"
    else:
        os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(level)
