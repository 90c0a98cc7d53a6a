"""Hydra callback: at the end of a multirun, one table of every job's revisions.

Each job returns its :class:`~emergence.job.RevisionResult` list. Jobs may run in
this process (basic launcher) or in others (joblib workers, submitit jobs); either
way their ``JobReturn`` objects come back to the launcher, where the sweeper keeps
them (``emergence.sweepstate``). The callback reads them there (falling back to what
``on_job_end`` saw in this process), and prints the per-model table, the formation
summary and the failed jobs once, after the last job, and logs the figures of every job's
curves into the sweep's parent run (emergence/parent_run.py).
"""

from __future__ import annotations

from typing import Any, List

from hydra.experimental.callback import Callback
from omegaconf import DictConfig


class SweepSummary(Callback):
    def __init__(self) -> None:
        self.returns: List[Any] = []

    def on_job_end(self, config: DictConfig, job_return: Any, **kwargs: Any) -> None:
        self.returns.append(job_return)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        from hydra.core.utils import JobStatus

        from emergence import sweepstate
        from emergence.job import format_markdown, format_table, formation_rows, stats_report
        from emergence.contract.mlflow_ui import open_lines
        from emergence.parent_run import log_figures, sweep_parent

        returns = sweepstate.RETURNS or self.returns
        results = []
        for ret in returns:
            if ret.status == JobStatus.COMPLETED and isinstance(ret._return_value, list):
                results.extend(ret._return_value)
        failed = list(sweepstate.FAILED)
        parent = sweep_parent(config) if results else None
        if parent is not None:  # the curves of every job's revisions, one line per model (emergence/parent_run.py)
            log_figures(config.tracking.uri, parent, results)
        if not config.get("report", True):
            return
        if results:
            print("\n=== sweep summary ===")
            print(format_table(results))
            print("\nWhen circuits form (first screened revision with at least one head flagged):")
            print(format_markdown(formation_rows(results)))
            if config.get("stats", False):
                print(stats_report(config, sorted({r.model for r in results})))
        if failed:
            print(f"\n{len(failed)} of {sweepstate.N_JOBS or len(returns)} job(s) failed "
                  "(their runs are FAILED in MLflow, with the error in the tag emergence.error):")
            for line in failed:
                print(f"  {line}")
        if results or failed:
            print(f"\nOpen the runs with:\n{open_lines(config.tracking.uri, config.tracking.experiment)}")
