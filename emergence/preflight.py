"""Every check a job makes before any work: bad input leaves nothing behind.

:func:`validate` runs, in one line per refusal (:class:`~emergence.EmergenceError`), before
any model is loaded or trained, any run opened or any file written, for a job, for every
job of a ``-m`` sweep (the sweeper calls it) and for a dry run:

1. the config against its schema and each group's own rules (emergence/config.py);
2. the screen recipe against the corpus it needs (emergence/screens/recipes.py);
3. the model's source, and the revisions the ``revision`` group selects
   (emergence/catalog.py, emergence/sources/);
4. the family, from the first revision's ``config.json`` read before any weights
   (``model.family: auto``, or a named family checked against it: ``catalog.resolve_family``;
   a job may fetch that one file from the hub, a dry run never), then the device and the
   family's dtype (emergence/loading.py);
5. the probe and the ablation's heads against the model's limits as its source declares
   them before loading (``ModelSource.declared_limits``): vocabulary, context, layers, heads;
6. the store (:func:`check_store`): a known scheme, a writable folder, a server that answers;
7. what the model source writes before screening (a toy suite still to train: a writable
   ``cache.toy_dir``). The run folder (``hydra.run.dir``) is checked before Hydra makes it
   (emergence/__main__.py, :func:`emergence.contract.checks.run_folder_problem`).
"""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass
from typing import List, Optional

from omegaconf import DictConfig

from emergence import EmergenceError, catalog
from emergence.config import check_config
from emergence.contract.storecheck import store_problem
from emergence.loading import choose_device, choose_dtype
from emergence.probes import check_probe
from emergence.revisions import Revision
from emergence.screens import recipe_for
from emergence.screens.ablation import check_heads
from emergence.sources import ModelSource


@dataclass(frozen=True)
class JobPlan:
    """What a job's config resolves to, checked once before any work (:func:`validate`): the rest of
    the job reads these instead of resolving them again from the config."""

    #: the model's source (``model.revisions``: emergence/sources/)
    source: ModelSource
    #: every revision of the model, ordered by tokens (its known revisions)
    known: List[Revision]
    #: the revisions the job screens (the ``revision`` group's selection, or its pinned one)
    revisions: List[Revision]


def validate(cfg: DictConfig) -> JobPlan:
    """Check every user-given value (see the module notes); returns the job's plan."""
    check_config(cfg)
    recipe_for(cfg.screen).check(cfg.screen, cfg.corpus)
    source = catalog.model_source(cfg.model)  # the config against its source (emergence/sources/)
    known = source.revisions(cfg.model)
    revisions = catalog.selected_revisions(cfg.model, cfg.revision, known)
    problem = source.selection_problem(cfg.model, revisions)  # e.g. a revisions.json naming a missing folder
    if problem:
        raise EmergenceError(problem)
    catalog.resolve_family(cfg.model, revisions, network=not cfg.dry_run)  # config.json, before any weights
    choose_dtype(cfg.model.family, cfg.model.dtype, choose_device(cfg.device))
    limits = source.declared_limits(cfg.model, revisions)
    note = check_probe(cfg.corpus, limits)
    if note:
        print(f"note: {note}", file=sys.stderr)
    if cfg.screen.ablation is not None:
        check_heads(cfg.screen.ablation, limits)
    check_store(cfg.tracking)
    problem = source.write_problem(cfg.model, cfg.cache.toy_dir)  # e.g. a read-only cache.toy_dir
    if problem:
        raise EmergenceError(problem)
    return JobPlan(source, known, revisions)


def check_store(tracking) -> None:
    """The store of ``tracking`` can be used (emergence/contract/storecheck.py: a known scheme; a local
    store writable, a server answering within ``tracking.connect_timeout_s``); checked once per
    process and store, before any work, dry runs included."""
    _check_store(str(tracking.uri), tracking.artifacts, float(tracking.connect_timeout_s))


@functools.lru_cache(maxsize=None)
def _check_store(uri: str, artifacts: Optional[str], timeout_s: float) -> None:
    problem = store_problem(uri, artifacts, timeout_s)
    if problem:
        raise EmergenceError(problem)
