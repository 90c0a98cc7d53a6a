"""Downloads and loads that run ahead across the jobs of a sweep (``-m``, jobs run in this process).

Under ``-m`` each job has one pinned revision, so its own pipeline (emergence/prefetch.py) has
nothing to overlap. With Hydra's basic launcher the sweeper opens :func:`sweep_prefetch` over each
batch: one :class:`~emergence.prefetch.Pipeline` over the jobs' hub revisions in launch order, so
job k+1's revision is downloaded (with :func:`loads_ahead`, loaded) while job k screens. A job
asks for its revision with :func:`take`, which advances the pipeline; a job whose revision it
does not hold (nothing to download, a refinement round, a finished run) fetches as usual.
Eviction stays the jobs' own; :func:`remaining` tells them how many revisions are still to come.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Iterator, List, Optional, Sequence

from omegaconf import OmegaConf

from emergence.loading import choose_device, load
from emergence.prefetch import Fetched, Pipeline
from emergence.tracking import Tracker, config_hash

_ACTIVE: Optional["SweepPrefetch"] = None


def loads_ahead(cfg) -> bool:
    """Whether the next revision is also loaded while this one is screened: ``cache.load_ahead``
    (null: on CUDA only, where two models fit beside the batches; on the CPU it would double
    the host memory a job needs)."""
    setting = cfg.cache.load_ahead
    return bool(setting) if setting is not None else choose_device(cfg.device).type == "cuda"


def fingerprint(cfg) -> str:
    """What must match for a job to use a model loaded for another job's config."""
    return repr((OmegaConf.to_container(cfg.model, resolve=True), cfg.device, cfg.matmul_precision))


def _key(plan) -> tuple:
    """(model name, revision name) of a pinned job's plan."""
    return (plan.config.model.name, plan.revisions[0].name)


class SweepPrefetch:
    """One pipeline over a batch's job revisions (see the module docstring)."""

    def __init__(self, plans: Sequence[Any], progress: bool = True):
        self.items = list(plans)
        self.taken = 0

        def fetch(plan):
            cfg = plan.config
            return plan.source.fetch(cfg.model, plan.revisions[0], plan.known, cfg.cache.toy_dir, progress)

        def load_ahead(plan, folder):
            cfg = plan.config
            if not loads_ahead(cfg):
                return None
            return load(cfg.model, plan.revisions[0], known=plan.known, device=cfg.device, toy_dir=cfg.cache.toy_dir,
                        progress=False, folder=folder, precision=cfg.matmul_precision, source=plan.source)

        self.pipeline = Pipeline(self.items, fetch, load=load_ahead)
        self._iter: Optional[Iterator[Fetched]] = None

    def take(self, cfg, revision) -> Optional[Fetched]:
        """The fetched (and maybe loaded) ``revision`` of the job ``cfg``, or None when this
        prefetch does not hold it; items before it that no job asked for are dropped."""
        key = (cfg.model.name, revision.name)
        if key not in map(_key, self.items[self.taken:]):
            return None
        if self._iter is None:
            self._iter = iter(self.pipeline)
        for got in self._iter:
            self.taken += 1
            if _key(got.item) == key:
                if got.loaded is not None and fingerprint(got.item.config) != fingerprint(cfg):
                    got.loaded = None
                return got
        return None

    def remaining(self) -> int:
        """Revisions of the batch not yet handed to a job."""
        return len(self.items) - self.taken

    def close(self) -> None:
        if self._iter is not None:
            self._iter.close()


def sweep_items(plans: Sequence[Any]) -> List[Any]:
    """The pinned jobs' plans (emergence/preflight.py) with a hub revision and no finished run (or
    ``force``), in order: what a :class:`SweepPrefetch` fetches ahead."""
    items, trackers = [], {}
    for plan in plans:
        cfg = plan.config
        if cfg.revision.pin is None or not plan.source.evictable:
            continue
        (revision,) = plan.revisions
        key = (str(cfg.tracking.uri), cfg.tracking.experiment)
        if key not in trackers:
            trackers[key] = Tracker(cfg.tracking)
        if not cfg.force and trackers[key].finished_run(config_hash(cfg, revision)) is not None:
            continue
        items.append(plan)
    return items


@contextlib.contextmanager
def sweep_prefetch(plans: Sequence[Any], progress: bool = True):
    """Within the block, jobs run in this process take their revisions from one pipeline over
    ``plans`` (the batch's job plans, in launch order)."""
    global _ACTIVE
    items = sweep_items(plans)
    if not items or _ACTIVE is not None:
        yield None
        return
    _ACTIVE = SweepPrefetch(items, progress)
    try:
        yield _ACTIVE
    finally:
        _ACTIVE.close()
        _ACTIVE = None


def still_there(folder) -> bool:
    """Whether a folder fetched ahead still holds its revision (an earlier job of the same
    revision, another screen of it, may have evicted it since: then it is fetched again)."""
    return folder is not None and (Path(str(folder)) / "config.json").exists()


def take(cfg, revision) -> Optional[Fetched]:
    """For a job: its revision from the active sweep prefetch, or None."""
    return _ACTIVE.take(cfg, revision) if _ACTIVE is not None else None


def remaining() -> int:
    """Revisions of the active sweep prefetch still to come (0 without one)."""
    return _ACTIVE.remaining() if _ACTIVE is not None else 0
