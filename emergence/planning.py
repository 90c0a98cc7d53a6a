"""Dry runs (``dry_run=true``): the jobs a config would run, offline.

:func:`planned_jobs` lists, after the same checks as a real run, each revision a job would screen
with what it would download as far as the disk knows; nothing is loaded, no run is opened and the
hub is never asked. A ``revision=refine`` job lists its first round (:func:`refine_first_round`).
Printed by :func:`emergence.console.format_plan`; a live job's plan is emergence/live/job.py's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List

from omegaconf import DictConfig

from emergence.config import refines
from emergence.preflight import validate
from emergence.refine_rounds import refine_plan, screened_runs
from emergence.revisions import Revision


@dataclass
class PlannedJob:
    model: str
    revision: Revision
    #: What a screen of this revision downloads, as far as the local HF cache knows.
    download: str
    #: What the job does first (a toy to train, with a time estimate); '' for nothing.
    preparation: str = ""


def planned_jobs(cfg: DictConfig) -> List[PlannedJob]:
    """The jobs ``cfg`` would run (module notes)."""
    plan = validate(cfg)
    cfg = plan.config
    revisions = refine_first_round(cfg, plan.revisions, plan.known) if refines(cfg) else plan.revisions
    sizes = plan.source.download_sizes(cfg.model, revisions)  # from the disk alone, never the hub
    first = plan.source.preparation(cfg.model, cfg.cache.toy_dir)
    return [PlannedJob(plan.label, r, sizes[r.name], first) for r in revisions]


def refine_first_round(cfg: DictConfig, start: List[Revision], known: List[Revision]) -> List[Revision]:
    """What ``revision=refine`` screens first: the start selection when fewer than 2 revisions
    of this identity are screened, else the first round's revisions (its plan printed); ``known``:
    the model's revisions."""
    runs = screened_runs(cfg, known)
    if len(runs) < 2:
        print(f"refine: {len(runs)} revision(s) screened; the first round screens the start selection")
        return start
    plan = refine_plan(cfg, known, runs)
    print(f"refine round 1 ({cfg.model.name}, {len(runs)} revisions screened):\n{plan.describe()}")
    return plan.revisions
