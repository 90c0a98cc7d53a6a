"""Live screening during training, and checkpoints saved where the circuits form.

A monitor screens the model *while it trains* with a small probe, logs every screen as
a run of the run contract (the same model, revision ``step<N>``, tokens, classes and
``heads.csv`` as a checkpoint screen) into the study's store, and decides where
checkpoints are saved: densely while a transition is under way, sparsely (log-spaced)
otherwise. Every saved checkpoint is an ordinary HF folder listed in the folder's
``revisions.json`` (a ``model.revisions: folder`` model), screened once.

Modules, in the order of the flow: ``view`` (the configs a live screen runs under),
``detector``, ``schedule``, ``screening``, ``checkpoints``, ``run_writer``, ``monitor``
(:class:`LiveMonitor`: any training loop), ``callback`` (:class:`LiveCallback`: the HF
``Trainer``), ``toy`` and ``job`` (``python -m emergence model=toy_neox live=adaptive``).
"""

from __future__ import annotations

from emergence.live.view import folder_config, live_view, plain

__all__ = ["LiveMonitor", "LiveCallback", "folder_config", "live_view", "plain"]


def __getattr__(name):  # (torch and transformers only when a monitor is asked for: importing the package does not)
    if name == "LiveMonitor":
        from emergence.live.monitor import LiveMonitor as found
    elif name == "LiveCallback":
        from emergence.live.callback import LiveCallback as found
    else:
        raise AttributeError(f"module 'emergence.live' has no attribute {name!r}")
    return found
