"""Hydra search-path plugin: a user's own config folders, outside the package.

``python -m emergence`` (and the compose API the checks use) finds config options first in the
package's ``conf/``, then in ``$EMERGENCE_HOME/conf`` when that folder exists, then in the folders
given with Hydra's ``--config-dir DIR`` or ``hydra.searchpath=[file://DIR]``. Hydra adds those to
its app itself; ``$EMERGENCE_CONFIG_DIRS`` holds them for the checks made before it starts and for
a sweep's worker processes (emergence/catalog.py ``use_config_dirs``: an environment variable, not
a module global, because Hydra's plugin scan executes this module again).

Standard library and Hydra only: every Hydra app of the environment imports it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import List

from hydra.core.config_search_path import ConfigSearchPath
from hydra.plugins.search_path_plugin import SearchPathPlugin

#: Folders added by a command line (emergence.catalog.use_config_dirs), os.pathsep-separated.
EXTRA_VARIABLE = "EMERGENCE_CONFIG_DIRS"


def _extra_dirs() -> List[str]:
    return [d for d in os.environ.get(EXTRA_VARIABLE, "").split(os.pathsep) if d]


def add_config_dir(folder: str) -> None:
    """Add ``folder`` to ``$EMERGENCE_CONFIG_DIRS`` (once)."""
    if folder not in _extra_dirs():
        os.environ[EXTRA_VARIABLE] = os.pathsep.join(_extra_dirs() + [folder])


def user_config_dirs() -> List[str]:
    """``$EMERGENCE_HOME/conf`` (when it exists) and ``$EMERGENCE_CONFIG_DIRS``, as absolute paths, once each."""
    home = os.environ.get("EMERGENCE_HOME")
    found = [str(Path(home, "conf").resolve())] if home and Path(home, "conf").is_dir() else []
    for folder in _extra_dirs():
        if str(Path(folder).resolve()) not in found:
            found.append(str(Path(folder).resolve()))
    return found


class EmergenceSearchPath(SearchPathPlugin):
    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        for folder in user_config_dirs():
            search_path.append(provider="emergence-user", path=f"file://{folder}")
