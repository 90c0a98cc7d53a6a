"""``revision=refine``: the rounds of an adaptive refinement, for one job or for a sweep's.

The rule of a round is emergence/refine_rule.py's, from the head counts of the runs already
screened (:func:`screened_runs`). :func:`refine_rounds` is the one round loop: plan, screen what
the rounds add (this process for one job, :func:`refine_job`; pinned jobs for the sweeper), plan
again, until each is resolved or has run ``revision.refine.rounds`` rounds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from omegaconf import DictConfig

from emergence.console import format_refinement
from emergence.common.contract import CONFIG_HASH_TAG, count_metric
from emergence.common.store import sqlite_file
from emergence.preflight import JobPlan
from emergence.refine_rule import Bracket, RoundPlan, plan_round
from emergence.revisions import Revision
from emergence.screening import RevisionResult, screen_revisions
from emergence.tracking import Tracker, config_hash


def screened_runs(cfg: DictConfig, known: List[Revision], tracker: Optional[Tracker] = None) -> Dict[Revision, object]:
    """The complete runs of this job's identity (model, corpus, screen) per known revision.

    Matched by the identity hash, so runs of another corpus or screen never count. With no
    ``tracker`` the store is only read when it exists (a dry run creates nothing)."""
    if tracker is None:
        db = sqlite_file(cfg.tracking.uri)
        if db is not None and not db.exists():
            return {}
        tracker = Tracker(cfg.tracking)
    by_hash = {config_hash(cfg, r): r for r in known}
    out: Dict[Revision, object] = {}
    for run in sorted(tracker.complete_runs(cfg.model.name), key=lambda run: run.info.start_time):
        r = by_hash.get(run.data.tags.get(CONFIG_HASH_TAG))
        if r is not None:
            out[r] = run  # the newest run of a revision wins
    return out


def refine_plan(cfg: DictConfig, known: List[Revision], runs: Dict[Revision, object]) -> RoundPlan:
    """The next round (:func:`emergence.refine_rule.plan_round`) from the screened ``runs``' head counts."""
    ref = cfg.revision.refine
    counts = {head_class: {r: run.data.metrics[count_metric(head_class)] for r, run in runs.items()
                           if count_metric(head_class) in run.data.metrics} for head_class in ref.classes}
    return plan_round(counts, known, list(ref.classes), int(ref.per_round), bool(ref.get("declines", False)))


@dataclass
class Refinement:
    """One identity being refined: its config, its model's known revisions and its rounds so far."""

    cfg: DictConfig
    known: List[Revision]
    rounds: int = 0
    #: The revisions its rounds added, in round order.
    added: List[Revision] = field(default_factory=list)
    #: The plan of its first round (the brackets before) and of its last (the brackets after).
    before: Optional[RoundPlan] = None
    plan: Optional[RoundPlan] = None
    #: Its screened runs when the last plan was made (:func:`screened_runs`).
    runs: Dict[Revision, object] = field(default_factory=dict)
    #: The brackets its rounds refined (added revisions inside), per class entry, in round order, once each.
    refined: Dict[str, List[Bracket]] = field(default_factory=dict)

    def note_round(self, plan: RoundPlan) -> None:
        """Record the brackets ``plan`` refines (:attr:`refined`)."""
        for key, chosen in plan.chosen.items():
            bracket = plan.brackets[key]
            seen = self.refined.setdefault(key, [])
            if chosen and bracket is not None and (not seen or seen[-1].span != bracket.span):
                seen.append(bracket)

    @property
    def max_rounds(self) -> int:
        return int(self.cfg.revision.refine.rounds)

    def table(self) -> str:
        """The before/after table of its brackets (:func:`emergence.console.format_refinement`)."""
        return format_refinement(self.cfg.model.name, self.before, self.plan, self.added, self.rounds, self.refined)


def refine_rounds(refinements: Sequence[Refinement], runs_of: Callable[[Refinement], Dict[Revision, object]],
                  screen: Callable[[List[Tuple[Refinement, List[Revision]]]], None],
                  header: Callable[[Refinement], str]) -> None:
    """The round loop: plan each refinement's next round from ``runs_of`` (done when resolved or out
    of rounds); print the others' rounds (``header``, then the plan) and ``screen`` them together
    (each refinement with its round's revisions); repeat until every refinement is done."""
    while True:
        due: List[Tuple[Refinement, List[Revision]]] = []
        for job in refinements:
            job.runs = runs_of(job)
            job.plan = refine_plan(job.cfg, job.known, job.runs)
            job.before = job.before or job.plan
            if job.plan.done or job.rounds >= job.max_rounds:
                continue
            job.rounds += 1
            job.added += job.plan.revisions
            job.note_round(job.plan)
            print(f"{header(job)}:\n{job.plan.describe()}")
            due.append((job, job.plan.revisions))
        if not due:
            return
        screen(due)


def refine_job(plan: JobPlan, progress: bool = True, parent_run: Optional[str] = None) -> List[RevisionResult]:
    """``revision=refine`` in this process: the start selection first when fewer than 2 revisions of
    this identity are screened, then the rounds (:func:`refine_rounds`), then the before/after table.
    Returns every screened revision of this identity (earlier ones as ``skipped``)."""
    cfg, known = plan.config, plan.known
    tracker = Tracker(cfg.tracking, parent_run)
    runs = screened_runs(cfg, known, tracker)
    if len(runs) < 2:
        start = plan.revisions
        print(f"refine: {len(runs)} revision(s) of {cfg.model.name} screened with this corpus and screen; "
              f"screening the start selection first ({len(start)} revisions, revision.k={cfg.revision.k})")
        screen_revisions(cfg, plan, progress, parent_run)
    job = Refinement(cfg, known)
    refine_rounds([job], lambda _job: screened_runs(cfg, known, tracker),
                  lambda due: screen_revisions(cfg, plan.pinned(due[0][1]), progress, parent_run),
                  lambda _job: f"refine round {_job.rounds} of at most {_job.max_rounds} ({cfg.model.name})")
    print(job.table())
    return [RevisionResult(cfg.model.name, r, run.info.run_id, dict(run.data.metrics), skipped=r not in job.added,
                           classes=tuple(cfg.screen.classes)) for r, run in sorted(job.runs.items())]
