"""The configs a live screen runs under: a job's config as plain data, its live view, and a
checkpoint folder's config for a model trained elsewhere (emergence/live/)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Sequence

from omegaconf import OmegaConf

from emergence.config import ModelConfig
from emergence.catalog import compose


def plain(cfg):
    """A resolved copy of a job's config, without Hydra's own node (a sweep's configs hold one)."""
    return OmegaConf.create({k: OmegaConf.to_container(cfg[k], resolve=True) if OmegaConf.is_config(cfg[k])
                             else cfg[k] for k in cfg if k != "hydra"})


def live_view(cfg):
    """The config a live screen runs and logs under: ``cfg`` with the probe cut to
    ``live.n_sequences`` sequences and the screen's participation ratio set by
    ``live.participation_ratio`` (so the run identity says what the live screen measured)."""
    view = plain(cfg)
    view.corpus.n_sequences = int(cfg.live.n_sequences)
    view.screen.participation_ratio = bool(cfg.live.participation_ratio)
    return view


def folder_config(name: str, path, family: str, pretraining_corpus: str = "unknown",
                  tokens_per_step: Optional[int] = None, overrides: Sequence[str] = ()):
    """A composed emergence config (``overrides`` as on the command line, e.g. ``live=adaptive``) whose
    model is the checkpoint folder ``path``, where a :class:`~emergence.live.LiveMonitor` or
    :class:`~emergence.live.LiveCallback` saves the checkpoints of a model trained elsewhere."""
    cfg = compose(list(overrides))
    model = {"name": name, "path": str(Path(path).expanduser().resolve()), "repo": None, "family": family,
             "revisions": "folder", "pretraining_corpus": pretraining_corpus,
             "tokens": {"tokens_per_step": tokens_per_step}, "recipe": None}
    cfg.model = OmegaConf.merge(OmegaConf.structured(ModelConfig), model)
    return cfg
