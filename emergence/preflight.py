"""Every check a job makes before any work: bad input leaves nothing behind.

:func:`validate` runs, one line per refusal (:class:`~emergence.EmergenceError`), before any model
is loaded or trained, any run opened or any file written, for a job, every job of a ``-m`` sweep
and a dry run:

1. the config against its schema and each group's own rules (emergence/config.py);
2. the screen recipe against the corpus it needs (emergence/screens/recipes.py);
3. the model's source and the revisions the ``revision`` group selects (emergence/catalog.py);
4. the family, from the first revision's ``config.json`` read before any weights (a job may fetch
   that one file, a dry run never), then the device and the family's dtype (emergence/loading.py);
5. the probe and the ablation's heads against the model's limits as its source declares them
   (``ModelSource.declared_limits``): vocabulary, context, layers, heads;
6. the store (:func:`_check_store`): a known scheme, a writable folder, a server that answers;
7. what the model source writes before screening (a toy suite to train: a writable ``cache.toy_dir``).

The run folder (``hydra.run.dir``) is checked before Hydra makes it (emergence/__main__.py).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import sys
from dataclasses import dataclass
from typing import Any, List, Optional, Sequence

from omegaconf import DictConfig

from emergence import EmergenceError, catalog
from emergence.config import CORPUS_KINDS, check_config
from emergence.common.storecheck import store_problem
from emergence.loading import choose_device, choose_dtype
from emergence.probes import CorpusKind
from emergence.revisions import Revision
from emergence.screens.recipes import ScreenRecipe, recipe_for
from emergence.screens.ablation import check_heads
from emergence.sources import ModelSource


@dataclass(frozen=True)
class JobPlan:
    """What a job's config resolves to, checked once before any work (:func:`validate`, the plan's one
    builder): the rest of the job reads these instead of resolving them again from the config."""

    #: the model's source (``model.revisions``: emergence/sources/)
    source: ModelSource
    #: every revision of the model, ordered by tokens (its known revisions)
    known: List[Revision]
    #: the revisions the job screens (the ``revision`` group's selection, or its pinned one)
    revisions: List[Revision]
    #: its name in tables, curves and stores (with its seed where a seed tells its runs apart)
    label: str
    #: which run of a seed suite it is (:class:`emergence.common.contract.RunSeed`), None for a model of one run
    seed: Any
    #: the screen recipe (``screen.recipe``) and the probe's corpus kind (``corpus.kind``)
    recipe: ScreenRecipe
    probe: CorpusKind
    #: the job's config, resolved: a copy of the given one (never written to), its ``model.family`` read
    #: from the checkpoint (which the run's identity and params record), its store checked to answer
    config: DictConfig

    def pinned(self, revisions: Sequence[Revision]) -> "JobPlan":
        """This plan for ``revisions`` of its selection (a sweep's job pinned to one revision)."""
        return dataclasses.replace(self, revisions=list(revisions))


def validate(cfg: DictConfig) -> JobPlan:
    """Check every user-given value (see the module notes); returns the job's plan."""
    check_config(cfg)
    recipe = recipe_for(cfg.screen)
    recipe.check(cfg.screen, cfg.corpus)
    source = catalog.model_source(cfg.model)  # the config against its source (emergence/sources/)
    known = source.revisions(cfg.model)
    revisions = catalog.selected_revisions(cfg.model, cfg.revision, known)
    problem = source.selection_problem(cfg.model, revisions)  # e.g. a revisions.json naming a missing folder
    if problem:
        raise EmergenceError(problem)
    family = catalog.resolve_family(cfg.model, revisions, network=not cfg.dry_run)  # config.json, before any weights
    choose_dtype(family, cfg.model.dtype, choose_device(cfg.device))
    limits = source.declared_limits(cfg.model, revisions)
    probe = CORPUS_KINDS.get(cfg.corpus.kind)
    note = probe.check(cfg.corpus, limits)
    if note:
        print(f"note: {note}", file=sys.stderr)
    if cfg.screen.ablation is not None:
        check_heads(cfg.screen.ablation, limits)
    _check_store(str(cfg.tracking.uri), cfg.tracking.artifacts, float(cfg.tracking.connect_timeout_s))
    problem = source.write_problem(cfg.model, cfg.cache.toy_dir)  # e.g. a read-only cache.toy_dir
    if problem:
        raise EmergenceError(problem)
    config = copy.deepcopy(cfg)
    config.model.family = family
    return JobPlan(source, known, revisions, catalog.model_label(cfg.model), source.run_seed(cfg.model), recipe, probe,
                   config)


@functools.lru_cache(maxsize=None)
def _check_store(uri: str, artifacts: Optional[str], timeout_s: float) -> None:
    """The store can be used (emergence/common/storecheck.py); checked once per process and store."""
    problem = store_problem(uri, artifacts, timeout_s)
    if problem:
        raise EmergenceError(problem)
