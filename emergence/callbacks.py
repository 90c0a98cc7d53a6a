"""Hydra callback: at the end of a multirun, one table of every job's revisions.

Each job returns its :class:`~emergence.job.RevisionResult` list; the callback
collects them (the basic launcher runs jobs in this process) and prints the per-model
table and the formation summary once, after the last job.
"""

from __future__ import annotations

from typing import Any, List

from hydra.experimental.callback import Callback
from omegaconf import DictConfig


class SweepSummary(Callback):
    def __init__(self) -> None:
        self.results: List[Any] = []

    def on_job_end(self, config: DictConfig, job_return: Any, **kwargs: Any) -> None:
        try:
            value = job_return.return_value
        except Exception:  # a failed job: its error was already reported
            return
        if isinstance(value, list):
            self.results.extend(value)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        from emergence.job import format_markdown, format_table, formation_rows, stats_report, ui_command

        if not self.results or not config.get("report", True):
            return
        print("\n=== sweep summary ===")
        print(format_table(self.results))
        print("\nWhen circuits form (first screened revision with at least one head flagged):")
        print(format_markdown(formation_rows(self.results)))
        if config.get("stats", False):
            print(stats_report(config, sorted({r.model for r in self.results})))
        print(f"\nOpen the runs with:\n  {ui_command(config.tracking.uri)}")
