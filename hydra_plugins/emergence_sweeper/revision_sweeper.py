"""A Hydra sweeper that turns revision selections into one job per revision.

Hydra's basic sweeper (cartesian product of ``a,b,c`` overrides), plus: a job whose ``revision``
selects several revisions becomes one job per revision, pinned with ``revision.pin=<name>``;
every job's config is checked (``emergence.preflight.validate``) before any job starts (bad
input: one line, exit status 2, nothing launched); a parent run is opened per store, experiment
and model (none when every job's run is finished), handed to each job as
``tracking.parent_run=<id>`` and kept alive by a heartbeat; with the basic launcher the next
job's revision is fetched while a job screens (``emergence.sweep_prefetch``);
``revision=refine`` jobs run in rounds after the others (emergence/refine_rounds.py). A failed
job does not stop the others; the sweep ends with the parent runs' figures, the summary
(``emergence.console.print_summary``) and, when jobs failed, one stderr line and exit status 1.

Selected in ``conf/config.yaml`` as ``override hydra/sweeper: revisions``. Hydra instantiates
sweepers only from the ``hydra_plugins`` namespace and imports this module for every app it runs
(``python -m stats`` too), so emergence's modules are imported inside the methods that use them.
"""


import contextlib
import copy
import dataclasses
import io
import sys
import time
from contextlib import ExitStack, redirect_stderr
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from hydra._internal.core_plugins.basic_launcher import BasicLauncher
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.config_store import ConfigStore
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.utils import JobReturn, JobStatus
from omegaconf import OmegaConf

from emergence import EmergenceError


@dataclass
class RevisionSweeperConf:
    _target_: str = "hydra_plugins.emergence_sweeper.revision_sweeper.RevisionSweeper"
    max_batch_size: Optional[int] = None
    params: Optional[Dict[str, str]] = None


ConfigStore.instance().store(group="hydra/sweeper", name="revisions", node=RevisionSweeperConf,
                             provider="emergence")


#: The override by which the sweeper hands each job its group's parent run.
PARENT = "tracking.parent_run="


def own_overrides(job: Sequence[str]) -> List[str]:
    """A job's overrides without the parent run the sweeper added."""
    return [o for o in job if not o.startswith(PARENT)]


@contextlib.contextmanager
def refused():
    """Exit 2 with one stderr line (``error: ...``) on an :class:`EmergenceError` (bad input)."""
    try:
        yield
    except EmergenceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)


def describe(overrides: Sequence[str]) -> str:
    """The overrides that tell jobs apart (model, revision, corpus, screen), for messages."""
    keep = [o for o in overrides if o.split("=")[0].lstrip("+") in
            ("model", "model.name", "revision.pin", "corpus", "screen", "revision", "revision.name")]
    return " ".join(keep or overrides)


class RevisionSweeper(BasicSweeper):
    #: ``revision=refine`` jobs (their overrides, unpinned): run in rounds by :meth:`_refine`.
    refine_bases: List[List[str]]
    #: Each job's plan (emergence/preflight.py ``JobPlan``), by its overrides: built once, by :meth:`_plan`.
    plans: Dict[tuple, Any]
    #: The notes the plans' checks printed (one line each, printed once by :meth:`_check`).
    notes: List[str]

    def _expand(self, overrides: Sequence[str]) -> List[List[str]]:
        """A job whose ``revision`` config selects several revisions becomes one job per revision,
        pinned, each with its share of the job's plan (checked once, here)."""
        from emergence.config import refines, trains_live

        cfg = self._config(overrides)
        if cfg.revision.pin is not None or trains_live(cfg):  # (a live job trains its toy: emergence/live/job.py)
            return [list(overrides)]
        if refines(cfg):  # planned round by round from the store, after the others
            self.refine_bases.append(list(overrides))
            return []
        plan = self._plan(overrides, cfg)
        if len(plan.revisions) < 2:
            return [list(overrides)]
        jobs = []
        for r in plan.revisions:
            jobs.append(list(overrides) + [f"revision.pin={r.name}"])
            config = copy.deepcopy(plan.config)
            config.revision.pin = r.name
            self.plans[tuple(jobs[-1])] = dataclasses.replace(plan, revisions=[r], config=config)
        return jobs

    def _config(self, overrides: Sequence[str]):
        return self.hydra_context.config_loader.load_sweep_config(self.config, list(overrides))

    def _plan(self, overrides: Sequence[str], cfg=None):
        """The job's plan (emergence/preflight.py ``validate``), its notes kept to be printed once."""
        from emergence.preflight import validate

        cfg = cfg if cfg is not None else self._config(overrides)
        err = io.StringIO()
        with redirect_stderr(err):
            plan = self.plans[tuple(overrides)] = validate(cfg)
        self.notes += [line for line in err.getvalue().splitlines() if line.strip() and line not in self.notes]
        return plan

    def _check(self, batches: List[List[List[str]]]) -> Dict[tuple, List[List[str]]]:
        """Every job's plan, each config checked once (exit 2 in one line on bad input); the jobs grouped
        by store, experiment and model (a parent run each: the UI groups runs by model)."""
        groups: Dict[tuple, List[List[str]]] = {}
        for batch in batches + [self.refine_bases]:
            for overrides in batch:
                with refused():
                    plan = self.plans.get(tuple(overrides)) or self._plan(overrides)
                t = plan.config.tracking
                groups.setdefault((t.uri, t.experiment, t.artifacts, str(plan.config.model.name)), []).append(overrides)
        for line in self.notes:
            print(line, file=sys.stderr)
        return groups

    def sweep(self, arguments: List[str]) -> Any:
        from emergence.tracking import end_parent

        assert self.config is not None and self.launcher is not None and self.hydra_context is not None
        self.refine_bases, self.plans, self.notes = [], {}, []
        params_conf = self._parse_config()
        params_conf.extend(arguments)
        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        self.overrides = self.split_arguments(parser.parse_overrides(params_conf), self.max_batch_size)

        batches: List[List[List[str]]] = []
        while not self.is_done():
            with refused():
                batch = [job for overrides in self.get_job_batch() for job in self._expand(overrides)]
            if batch:  # (a batch of refine jobs only expands to nothing here)
                batches.append(batch)
        groups = self._check(batches)
        if self.config.dry_run:  # list the jobs and stop: no store, no parent run, no job
            return self._dry_run(batches)

        sweep_dir = Path(self.config.hydra.sweep.dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, sweep_dir / "multirun.yaml")
        parents, parent_of, beats = self._open_parents(groups, str(self.config.tracking.sweep or sweep_dir))
        batches = [[job + [f"{PARENT}{parent_of[tuple(job)]}"] for job in batch] for batch in batches]

        outcome = SweepOutcome({p: [] for p in parents.values()})
        try:
            with beats:
                self._launch(batches, outcome)
                if not outcome.store_failed():
                    self._refine(parent_of, outcome)
        except BaseException as exc:  # Ctrl-C in the launcher: the parents end KILLED, not RUNNING
            for key, parent in parents.items():
                end_parent(key[0], parent, outcome.failed_of[parent] + [f"sweep interrupted: {type(exc).__name__}"],
                           status="KILLED")
            if isinstance(exc, KeyboardInterrupt):  # one line, read from the store (a batch cut short returns nothing)
                from emergence.console import interrupted_line
                from emergence.parent_run import finished_children

                done = sum(finished_children(key[0], parent) for key, parent in parents.items())
                print(interrupted_line(done, sum(map(len, batches)), "job(s)"), file=sys.stderr)
            raise
        for key, parent in parents.items():
            end_parent(key[0], parent, outcome.failed_of[parent])
        self._report(outcome, parents)
        return outcome.returns

    def _open_parents(self, groups: Dict[tuple, List[List[str]]], sweep_id: str):
        """The store, the experiment and the sweep's parent run of each group exist before any job
        starts; the parents' heartbeats are kept while the jobs run (a killed sweep's parent is ended
        later). Returns (group -> parent, job -> parent, the heartbeats); exit 1 when a store fails."""
        from emergence.common.store import StoreError
        from emergence.parent_run import all_finished  # (never for a refinement or with force)
        from emergence.tracking import parent_heartbeat, start_parent

        parents: Dict[tuple, str] = {}
        parent_of: Dict[tuple, str] = {}
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        tracking = self.config.tracking
        beats = ExitStack()
        try:
            for key, jobs in groups.items():
                if all(all_finished(self.plans[tuple(job)].config, self.plans[tuple(job)].revisions) for job in jobs):
                    parent_of.update({tuple(job): "null" for job in jobs})
                    continue
                uri, experiment, artifacts, model = key
                _, parent = start_parent(uri, experiment, artifacts, sweep_id, f"sweep {stamp}: {model} ({len(jobs)} jobs)",
                                         model, len(jobs), float(tracking.stale_after_s), float(tracking.timeout_s))
                parents[key] = parent
                beats.enter_context(parent_heartbeat(uri, parent, float(tracking.heartbeat_s)))
                for job in jobs:
                    parent_of[tuple(job)] = parent
        except StoreError as exc:
            beats.close()
            print(f"error: {exc}", file=sys.stderr)
            sys.exit(1)
        return parents, parent_of, beats

    def _report(self, outcome: "SweepOutcome", parents: Dict[tuple, str]) -> None:
        """The end of the sweep: the figures of each model's curves in its parent run of this config's
        store and experiment (emergence/parent_run.py), the summary (as a single job's:
        emergence/console.py), then, when jobs failed, one stderr line naming them and exit 1."""
        from emergence.console import print_summary
        from emergence.common.store import StoreError
        from emergence.parent_run import log_figures

        results = outcome.results()
        tracking = self.config.tracking
        here = {key[3]: p for key, p in parents.items() if key[:2] == (tracking.uri, tracking.experiment)}
        for model, parent in (here.items() if results and not outcome.store_failed() else ()):
            try:  # the model's curves (a line per seed of a seed suite)
                log_figures(tracking.uri, parent, [r for r in results if r.model == model])
            except StoreError as exc:
                outcome.failed.append(f"the sweep's figures: StoreError: {exc}")
                break
        print_summary(self.config, results, outcome.failed, outcome.n_jobs)
        if outcome.store_failed():
            cause = outcome.store_failed().split("StoreError: ", 1)[1]
            print(f"error: the sweep stopped after {outcome.n_jobs} job(s): {cause}. Once the store answers again, "
                  "run the same command to resume (complete runs are not screened again)", file=sys.stderr)
            sys.exit(1)
        if outcome.failed:
            print(f"error: {len(outcome.failed)} of {outcome.n_jobs} job(s) failed: " + "; ".join(outcome.failed),
                  file=sys.stderr)
            sys.exit(1)

    def _refine(self, parent_of: Dict[tuple, str], outcome: "SweepOutcome") -> None:
        """Run the ``revision=refine`` jobs in rounds (emergence/refine_rounds.py), each round one batch
        of pinned jobs; a job whose store holds fewer than 2 revisions of its identity first screens
        its start selection."""
        from emergence.refine_rounds import Refinement, refine_rounds, screened_runs

        plans = [self.plans[tuple(base)] for base in self.refine_bases]
        jobs = [Refinement(plan.config, plan.known) for plan in plans]
        # id(refinement) -> its overrides with its parent run
        bases = {id(job): [*base, f"{PARENT}{parent_of[tuple(base)]}"] for job, base in zip(jobs, self.refine_bases)}

        def pinned(job: Refinement, revisions) -> List[List[str]]:
            return [[*bases[id(job)], f"revision.pin={r.name}"] for r in revisions]

        start = [overrides for job, plan in zip(jobs, plans) if len(screened_runs(job.cfg, job.known)) < 2
                 for overrides in pinned(job, plan.revisions)]
        if start:
            print(f"refine: screening the start selection first ({len(start)} job(s))")
            self._launch([start], outcome)
        refine_rounds(jobs, lambda job: screened_runs(job.cfg, job.known),
                      lambda due: self._launch([[o for job, revisions in due for o in pinned(job, revisions)]], outcome),
                      lambda job: f"refine round {job.rounds} ({job.cfg.model.name})")
        for job in jobs:
            print(job.table())

    def _dry_run(self, batches: List[List[List[str]]]) -> List[Sequence[JobReturn]]:
        """``dry_run=true``: print every planned job (emergence/planning.py; a refine job's first round)."""
        from emergence.console import format_plan
        from emergence.job import plan_jobs

        planned = []
        for batch in batches + [self.refine_bases]:
            for overrides in batch:
                with redirect_stderr(io.StringIO()):  # validate's notes were printed once by _check
                    planned += plan_jobs(self._config(overrides))
        print(format_plan(planned))
        return []

    def _prefetch(self, batch: List[List[str]]):
        """With the basic launcher (jobs in this process), the batch's revisions fetched ahead
        (emergence/sweep_prefetch.py); other launchers run jobs elsewhere."""
        from emergence.sweep_prefetch import sweep_prefetch

        if not isinstance(self.launcher, BasicLauncher):
            return contextlib.nullcontext()
        plans = [self.plans.get(tuple(own_overrides(job))) for job in batch]  # (a refinement round's jobs: none)
        return sweep_prefetch([plan for plan in plans if plan is not None])

    def _launch(self, batches: List[List[List[str]]], outcome: "SweepOutcome") -> None:
        """Launch ``batches`` one after another; every job's return is kept in ``outcome``, and each
        failed job's line (``#<job> (<overrides>): <error>``) under its parent run."""
        initial_job_idx = 0
        for batch in batches:
            self.validate_batch_is_legal(batch)
            try:
                with self._prefetch(batch):
                    results = list(self.launcher.launch(batch, initial_job_idx=initial_job_idx))
            except Exception as exc:  # noqa: BLE001  (e.g. a submitit job killed by the scheduler)
                results = []
                for job in batch:
                    ret = JobReturn(overrides=job, status=JobStatus.FAILED)
                    ret.return_value = RuntimeError(f"the launcher failed: {type(exc).__name__}: {exc}")
                    results.append(ret)
            for idx, (job, ret) in enumerate(zip(batch, results)):
                if ret.status != JobStatus.COMPLETED:
                    exc = ret._return_value
                    error = f"{type(exc).__name__}: {exc}" if isinstance(exc, BaseException) else str(exc)
                    line = f"#{initial_job_idx + idx} ({describe(own_overrides(job))}): {error}"
                    outcome.failed.append(line)
                    parent = next(o[len(PARENT):] for o in job if o.startswith(PARENT))  # (added by sweep())
                    outcome.failed_of.setdefault(parent, []).append(line)
            initial_job_idx += len(batch)
            outcome.returns.append(results)
            if outcome.store_failed():  # every later job would wait out the same timeouts: stop here
                break


@dataclass
class SweepOutcome:
    """The jobs' returns, batch by batch (Hydra's ``JobReturn`` s), and the failed jobs' lines."""

    failed_of: Dict[str, List[str]]
    returns: List[Sequence[JobReturn]] = field(default_factory=list)
    #: One line per failed job: ``#<job> (<overrides>): <error>``.
    failed: List[str] = field(default_factory=list)

    def store_failed(self) -> Optional[str]:
        """The first failed job's line that says the MLflow store failed (it stops the sweep), or None."""
        return next((line for line in self.failed if "StoreError: " in line), None)

    @property
    def n_jobs(self) -> int:
        return sum(len(batch) for batch in self.returns)

    def results(self) -> list:
        """Every completed job's :class:`emergence.screening.RevisionResult` s, in launch order."""
        return [r for batch in self.returns for ret in batch
                if ret.status == JobStatus.COMPLETED and isinstance(ret._return_value, list) for r in ret._return_value]

