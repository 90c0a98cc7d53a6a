"""Where both apps write: ``<home>/outputs``, home = ``$EMERGENCE_HOME`` when set, else the
current working directory; and the config resolvers that say so (``${emergence_home:}``,
``${project_root:}``). Each app keeps its own config tree (``emergence.CONF_DIR``,
``stats.paths.CONF_DIR``); this is what they share."""

from __future__ import annotations

import os
from pathlib import Path

from omegaconf import OmegaConf

#: The folder that holds the packages: the checkout in an editable install, ``site-packages``
#: in an installed copy.
PROJECT_ROOT = Path(__file__).resolve().parents[2]


def emergence_home() -> Path:
    """The folder whose ``outputs/`` receives what a run writes: ``$EMERGENCE_HOME``, else the cwd."""
    home = os.environ.get("EMERGENCE_HOME")
    return Path(home).expanduser().resolve() if home else Path.cwd().resolve()


def register_resolvers() -> None:
    """``${project_root:}``, ``${emergence_home:}`` and ``${folder_name:PATH}`` (the last part of a
    path) for the config trees (once per process)."""
    if not OmegaConf.has_resolver("project_root"):
        OmegaConf.register_new_resolver("project_root", lambda: str(PROJECT_ROOT))
    if not OmegaConf.has_resolver("emergence_home"):
        OmegaConf.register_new_resolver("emergence_home", lambda: str(emergence_home()))
    if not OmegaConf.has_resolver("folder_name"):  # conf/model/folder.yaml: a model named after its folder
        OmegaConf.register_new_resolver("folder_name", lambda path: Path(str(path)).expanduser().resolve().name)
