"""``python -m emergence [group=option ...] [key=value ...]`` (``-m`` to sweep); with no arguments,
the toy suite (trained on first use).

Bad input exits with status 2 and one line naming the value and the valid choices, before any
model is loaded: :func:`precheck` checks the command line against the schema before Hydra starts,
``emergence.preflight.validate`` the rest. A job ends with :func:`emergence.console.print_summary`;
a ``-m`` sweep's summary and exit status are the sweeper's (hydra_plugins/emergence_sweeper).
"""

from __future__ import annotations

import re
import sys

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from emergence import EmergenceError, OutputError, emergence_home
from emergence.config import EmergenceConfig, trains_live
from emergence.console import format_plan, format_table, print_summary
from emergence.common.checks import discard_run_dir, run_folder_problem
from emergence.common.checks import precheck as compose_and_check
from emergence.common.quiet import quiet_logs, take_verbose_flag, verbose
from emergence.common.store import StoreError, failed_before
from emergence.help import register_resolver
from emergence.catalog import CONF_DIR, GROUPS, check_group_choice, use_config_dirs

register_resolver()  # `python -m emergence --help` (conf/config.yaml: hydra.help.template)

_GROUP_CHOICE = re.compile(rf"^\+?(?P<group>{'|'.join(GROUPS)})=(?P<value>[A-Za-z0-9_,\-]+)$")


def check_command_line(argv) -> None:
    """Fail in one line on an unknown group option (Hydra's own message spans many)."""
    for arg in argv:
        match = _GROUP_CHOICE.match(arg)
        if match:
            for value in match["value"].split(","):
                check_group_choice(match["group"], value)


def refuse(exc: BaseException) -> None:
    """Exit 2 with one line for input refused inside the Hydra app, leaving no Hydra log behind
    (emergence.common.checks.discard_run_dir)."""
    print(f"error: {exc}", file=sys.stderr)
    discard_run_dir(str(emergence_home() / "outputs"))
    sys.exit(2)


@hydra.main(config_path=str(CONF_DIR), config_name="config", version_base="1.3")
def main(cfg: DictConfig):
    # (torch, transformers and mlflow once a job runs: precheck, --help and --cfg stay without them)
    from emergence.job import plan_jobs, run_job
    from emergence.parent_run import job_parent
    from emergence.preflight import validate
    from emergence.screening import JobFailed

    quiet_logs(verbose())  # (again: Hydra has configured logging since)
    in_multirun = HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN
    if cfg.dry_run and not in_multirun:  # (a -m sweep's dry run is printed by the sweeper)
        try:
            print(format_plan(plan_jobs(cfg), cfg.screen.name))
        except EmergenceError as exc:
            refuse(exc)
        return []
    if in_multirun:
        # A sweep's job never exits the process (a joblib worker, a submitit job): it raises,
        # Hydra records the job FAILED, the sweep goes on, and the sweeper reports it. A store that
        # failed in an earlier job of this process is not tried again (the sweeper stops after the batch).
        down = failed_before(cfg.tracking.uri)
        if down is not None:
            raise JobFailed(f"StoreError: not started: {down}")
        try:
            return run_job(cfg)
        except (EmergenceError, JobFailed):
            raise
        except Exception as exc:  # a plain, picklable error comes back to the launcher
            raise JobFailed(f"{type(exc).__name__}: {exc}") from exc
    try:
        plan = None if trains_live(cfg) else validate(cfg)  # the input checked once, before any run is opened
        job = cfg if plan is None else plan.config  # (the job's config as resolved: emergence/preflight.py)
        with job_parent(job, None if plan is None else plan.revisions) as parent:  # its parent run (emergence/parent_run.py)
            results = parent.results = run_job(cfg, plan=plan, parent_run=parent.run_id)
    except EmergenceError as exc:
        refuse(exc)
    except (StoreError, OutputError) as exc:  # the store or a folder failed mid-job: what was written before stays
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(1)
    except JobFailed as exc:
        if cfg.report and exc.results:
            print(format_table(exc.results))
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(1)
    print_summary(cfg, results)  # (a sweep's jobs are summarised once, by the sweeper)
    return results


def precheck(argv) -> None:
    """Compose the command line (each value of a ``-m`` sweep) and check it against the schema before
    Hydra starts, and the run folder Hydra would create; the user's config folders count."""
    use_config_dirs(argv)
    check_command_line(argv)
    compose_and_check(argv, str(CONF_DIR), "config", EmergenceConfig, EmergenceError)
    problem = run_folder_problem(argv, str(CONF_DIR), "config")
    if problem:
        raise EmergenceError(problem)


def folder_model(argv):
    """``argv`` with ``model=folder`` added when it sets ``model.path`` without choosing a model
    (conf/model/folder.yaml: a model named after its folder, never the default toy's name)."""
    sets_path = any(a.split("=", 1)[0].lstrip("+") == "model.path" for a in argv)
    picks_model = any(_GROUP_CHOICE.match(a) and _GROUP_CHOICE.match(a)["group"] == "model" for a in argv)
    return ["model=folder"] + list(argv) if sets_path and not picks_model else list(argv)


def cli() -> None:
    quiet_logs(take_verbose_flag(sys.argv))  # the libraries' INFO lines only with -v (emergence/common/quiet.py)
    sys.argv[1:] = folder_model(sys.argv[1:])
    try:
        precheck(sys.argv[1:])
    except EmergenceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    try:
        main()  # (a -m sweep with failed jobs exits 1 from the sweeper, naming them)
    except KeyboardInterrupt:  # Ctrl-C: the job or the sweep printed its one line (what finished, how to resume)
        sys.exit(130)


if __name__ == "__main__":
    cli()
