"""One job: config -> catalog -> model at revision -> probe -> screens -> tracking.

This module only dispatches, after every input is checked (emergence/preflight.py): a live job
trains its toy with live screening (emergence/live/job.py), a ``revision=refine`` job refines round
by round (emergence/refine_rounds.py), any other screens its selection (emergence/screening.py); a
dry run plans instead (emergence/planning.py).
"""

from __future__ import annotations

from typing import List, Optional

from omegaconf import DictConfig

from emergence.config import refines, trains_live
from emergence.live import job as live_job
from emergence.planning import PlannedJob, planned_jobs
from emergence.preflight import JobPlan, validate
from emergence.refine_rounds import refine_job
from emergence.screening import RevisionResult, screen_revisions


def run_job(cfg: DictConfig, progress: bool = True, plan: Optional[JobPlan] = None,
            parent_run: Optional[str] = None) -> List[RevisionResult]:
    """Run one job (module notes). ``plan``: what :func:`emergence.preflight.validate` returned where
    the caller checked the input already (None: checked here); ``parent_run``: the parent run the
    job opened (emergence/parent_run.py), which its runs name."""
    if trains_live(cfg):
        return live_job.run(cfg, progress)
    plan = validate(cfg) if plan is None else plan
    cfg = plan.config
    results = refine_job(plan, progress, parent_run) if refines(cfg) else screen_revisions(cfg, plan, progress, parent_run)
    for r in results:
        r.label = plan.label
    return results


def plan_jobs(cfg: DictConfig) -> List[PlannedJob]:
    """The jobs a dry run of ``cfg`` lists (emergence/planning.py; a live job's: emergence/live/job.py)."""
    if trains_live(cfg):
        return live_job.plan(cfg)
    return planned_jobs(cfg)

