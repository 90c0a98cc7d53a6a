"""Downloads and loads that run ahead across the jobs of a sweep (``-m``, jobs run in this process).

Under ``-m`` the sweeper pins one revision per job, so a job's own download pipeline
(emergence/prefetch.py) has nothing to overlap. When the jobs run one after another in this
process (Hydra's basic launcher, the default), the sweeper opens a :class:`SweepPrefetch`
over each batch it launches (:func:`sweep_prefetch`): one :class:`~emergence.prefetch.Pipeline`
over the jobs' hub revisions in launch order, so job k+1's revision is downloaded into the
HF cache, and with load-ahead (:func:`loads_ahead`) read onto the device, while job k
screens. A job asks for its revision with :func:`take`; that advances the pipeline (never
more than one job ahead). A job whose revision it does not hold (a local folder or the toy
suite: nothing to download; a refinement round; a revision finished before, which is not
fetched at all) fetches and loads as usual. Eviction stays the jobs' own (``cache.evict``);
:func:`remaining` tells them how many revisions of the study are still to come, for
``cache.evict: null`` (evict when the disk would not hold the rest: :func:`emergence.prefetch.disk_short`).
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from dataclasses import dataclass
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
    if setting is not None:
        return bool(setting)
    return choose_device(cfg.device).type == "cuda"


def fingerprint(cfg) -> str:
    """What must match for a job to use a model loaded for another job's config."""
    return repr((OmegaConf.to_container(cfg.model, resolve=True), cfg.device, cfg.matmul_precision))


@dataclass
class SweepItem:
    key: tuple  # (model name, revision name)
    plan: Any  # the job's plan (emergence/preflight.py JobPlan), checked by the sweeper
    revision: Any


class SweepPrefetch:
    """One pipeline over a batch's job revisions (see the module docstring)."""

    def __init__(self, items: Sequence[SweepItem], progress: bool = True):
        self.items = list(items)
        self.taken = 0

        def fetch(item: SweepItem):
            plan, cfg = item.plan, item.plan.config
            return plan.source.fetch(cfg.model, item.revision, plan.known, cfg.cache.toy_dir, progress)

        def load_ahead(item: SweepItem, folder):
            plan, cfg = item.plan, item.plan.config
            if not loads_ahead(cfg):
                return None
            return load(cfg.model, item.revision, known=plan.known, device=cfg.device, toy_dir=cfg.cache.toy_dir,
                        progress=False, folder=folder, precision=cfg.matmul_precision, source=plan.source)

        self.pipeline = Pipeline(self.items, fetch, load=load_ahead)
        self._iter: Optional[Iterator[Fetched]] = None

    def take(self, cfg, revision) -> Optional[Fetched]:
        """The fetched (and maybe loaded) ``revision`` of the job ``cfg``, or None when this
        prefetch does not hold it; items before it that no job asked for are dropped."""
        key = (cfg.model.name, revision.name)
        ahead = [i for i, item in enumerate(self.items[self.taken:], self.taken) if item.key == key]
        if not ahead:
            return None
        if self._iter is None:
            self._iter = iter(self.pipeline)
        for got in self._iter:
            self.taken += 1
            if got.item.key == key:
                if got.loaded is not None and fingerprint(got.item.plan.config) != fingerprint(cfg):
                    got.loaded = None
                return got
        return None

    def remaining(self) -> int:
        """Revisions of the batch not yet handed to a job."""
        return len(self.items) - self.taken

    def close(self) -> None:
        if self._iter is not None:
            self._iter.close()


def sweep_items(plans: Sequence[Any]) -> List[SweepItem]:
    """The hub revisions of pinned jobs (their plans, emergence/preflight.py), in order, leaving out
    those with a finished run (and no ``force``): what a :class:`SweepPrefetch` fetches ahead."""
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
        items.append(SweepItem((cfg.model.name, revision.name), plan, revision))
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
