"""The job of ``python -m emergence model=toy_neox live=adaptive`` (``emergence.job.run_job``): every
input checked as for any job, the toy trained with the live monitor (emergence/live/toy.py) or
found trained, then the ordinary job on the trained suite as the checkpoint folder it is, with
the live probe and screen (the identity its live runs were logged under): the revisions that
``revision`` selects (``all`` by default) are found screened already and reported; one that is
not (a store that failed during training, another store) is screened from its folder now.

Under ``-m`` the sweeper makes one such job per model (the revisions are known only once the
model is trained, so they are not swept).
"""

from __future__ import annotations

from typing import List

from emergence import EmergenceError
from emergence.live.toy import ensure_trained_live, live_suite_folder, suite_config
from emergence.live.view import live_view
from emergence.planning import PlannedJob
from emergence.preflight import validate
from emergence.screening import RevisionResult, screen_revisions


def check(cfg) -> None:
    """Refuse what ``live=adaptive`` cannot do, in one line, before any training."""
    if cfg.revision.pin is not None:
        raise EmergenceError(f"revision.pin={cfg.revision.pin} cannot be set with live=adaptive: its checkpoints are "
                             "chosen during training (under -m each model is one job: -m model=toy_neox,toy_olmo "
                             "live=adaptive)")
    if cfg.model.revisions != "toy":  # (the source it names: emergence/sources/toy.py)
        raise EmergenceError(f"live=adaptive trains a toy model (model=toy_neox, toy_olmo, toy_olmoe); "
                             f"{cfg.model.name!r} has revisions: {cfg.model.revisions}. To screen a model you "
                             "train yourself, use emergence.live.LiveCallback (HF Trainer) or LiveMonitor")


def run(cfg, progress: bool = True) -> List[RevisionResult]:
    """Train (or find trained) and report; the results of the ordinary job on the live suite."""
    check(cfg)  # what live=adaptive cannot do, before the checks that may read a model's files
    validate(cfg)
    folder, logged = ensure_trained_live(cfg, progress)
    view = live_view(suite_config(cfg, folder))
    plan = validate(view)
    results = screen_revisions(plan.config, plan, progress)
    for r in results:
        if r.revision.name in logged:  # screened by the monitor during this training, not before it
            r.skipped = False
    return results


def plan(cfg) -> List[PlannedJob]:
    """The dry run: the trained live suite's selected revisions, or none (with a note) before training."""
    validate(cfg)
    check(cfg)
    folder = live_suite_folder(cfg)
    if not (folder / "revisions.json").is_file():
        print(f"live=adaptive: {cfg.model.name} is trained first, with live screening; its checkpoints are chosen "
              f"during training, into {folder}")
        return []
    view = live_view(suite_config(cfg, folder))
    plan = validate(view)
    revisions = plan.revisions
    sizes = plan.source.download_sizes(view.model, revisions)
    return [PlannedJob(view.model.name, r, sizes[r.name]) for r in revisions]
