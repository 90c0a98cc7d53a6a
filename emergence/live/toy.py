"""The toy suite trained with a live monitor (``python -m emergence model=toy_neox live=adaptive``).

The toy trainer (emergence/toy/train.py) runs unchanged with a :class:`LiveMonitor`: the
weights are those of the fixed-schedule suite, only the checkpoints differ. The suite is an
ordinary checkpoint folder beside the fixed one, ``<cache.toy_dir>/<name>-<recipe hash>-live-<live
hash>/`` (the live hash: the ``live`` settings, the live probe and screen, which decide the
checkpoints). Its runs are logged under :func:`suite_config` and the live view, so the job that
follows training finds every saved checkpoint screened already.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Tuple

from omegaconf import OmegaConf

from emergence.live.checkpoints import CheckpointFolder
from emergence.live.monitor import LiveMonitor
from emergence.live.view import live_view, plain
from emergence.toy.train import _locked, as_recipe, is_complete, recipe_hash, suite_folder, train_suite


def live_hash(cfg) -> str:
    """Hash of what decides a live suite's checkpoints: the ``live`` settings, the live probe and screen."""
    view = live_view(cfg)
    identity = {k: OmegaConf.to_container(view[k], resolve=True) for k in ("live", "corpus", "screen")}
    identity["corpus"].pop("batch_size", None)  # throughput only
    return hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()[:8]


def live_suite_folder(cfg) -> Path:
    fixed = suite_folder(cfg.model.recipe, cfg.cache.toy_dir, cfg.model.name)
    return fixed.with_name(f"{fixed.name}-live-{live_hash(cfg)}")


def suite_config(cfg, folder):
    """``cfg`` with its toy model as the checkpoint folder ``folder`` (the runs' model config)."""
    out = plain(cfg)
    out.model.revisions = "folder"
    out.model.path = str(Path(folder).resolve())
    return out


def ensure_trained_live(cfg, progress: bool = True) -> Tuple[Path, dict]:
    """The live suite's folder, trained first if needed (an interrupted training resumes with the monitor's
    state), and the revisions the monitor logged in this session (name -> run id; empty when trained)."""
    recipe = as_recipe(cfg.model.recipe)
    folder = live_suite_folder(cfg)
    identity = f"-live-{live_hash(cfg)}"
    digest = recipe_hash(recipe) + identity
    if is_complete(folder, digest=digest):
        return folder, {}
    with _locked(folder):
        if is_complete(folder, digest=digest):
            return folder, {}
        extra = {"name": cfg.model.name, "recipe_hash": digest, "live_hash": live_hash(cfg)}
        monitor = LiveMonitor(suite_config(cfg, folder), CheckpointFolder(folder, listing_extra=extra))
        train_suite(recipe, folder, cfg.model.name, progress=progress, monitor=monitor, identity=identity)
        return folder, dict(monitor.writer.logged)
