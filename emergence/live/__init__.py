"""Live screening during training, and checkpoints saved where the circuits form.

A monitor screens the model *while it trains* with a small probe, logs every screen as
a run of the run contract (the same model, revision ``step<N>``, tokens, classes and
``heads.csv`` as a checkpoint screen) into the study's store, and decides where
checkpoints are saved: densely while a transition is under way, sparsely (log-spaced)
otherwise. Every saved checkpoint is an ordinary HF folder listed in the folder's
``revisions.json`` (a ``model.revisions: folder`` model), screened once.

Modules: ``config`` (the ``live`` config group's schema), ``detector`` (the online
trigger), ``schedule`` (watch grid, sparse and dense saves), ``screening`` (one screen
that leaves training untouched), ``checkpoints`` (HF folders and the listing), ``store``
(runs, from a background thread), ``monitor`` (:class:`LiveMonitor`: ``step(model, step,
tokens)``), ``callback`` (:class:`LiveCallback` for the HF ``Trainer``), ``toy`` (the toy
suite trained with a monitor: ``python -m emergence model=toy_neox live=adaptive``) and
``job`` (that job).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Sequence

from omegaconf import OmegaConf

__all__ = ["LiveMonitor", "LiveCallback", "folder_config", "live_view", "plain"]


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
    """A composed emergence config (``overrides`` as on the command line, e.g. ``live=adaptive``,
    ``tracking.uri=...``) whose model is the checkpoint folder ``path`` (``revisions: folder``),
    where a monitor saves the checkpoints of a model trained elsewhere."""
    from emergence.config import ModelConfig
    from emergence.registry import compose

    cfg = compose(list(overrides))
    model = {"name": name, "path": str(Path(path).expanduser().resolve()), "repo": None, "family": family,
             "revisions": "folder", "pretraining_corpus": pretraining_corpus,
             "tokens": {"tokens_per_step": tokens_per_step}, "recipe": None}
    cfg.model = OmegaConf.merge(OmegaConf.structured(ModelConfig), model)
    return cfg


def __getattr__(name):  # torch and transformers are imported only when a monitor is asked for
    if name == "LiveMonitor":
        from emergence.live.monitor import LiveMonitor

        return LiveMonitor
    if name == "LiveCallback":
        from emergence.live.callback import LiveCallback

        return LiveCallback
    raise AttributeError(f"module 'emergence.live' has no attribute {name!r}")
