"""The parent run of a job or a sweep, with the curves and figures of its revisions.

A ``-m`` sweep's parent run is opened by the sweeper; a job run without ``-m`` opens its own
(:func:`job_parent`), so every study lands in MLflow the same way: opened after the input is
checked and only when a revision is left to screen (none for a live job), tagged as a sweep's
parent (kind, sweep id, host, pid, heartbeat), named ``job <date time>: <model>, <selection> (<N>
revisions)``; the job's runs nest under it and log their curves into it
(emergence.tracking.curve_metrics); at the end it gets their figures (:func:`log_figures`) and ends
FINISHED, FAILED naming the failed revisions, or KILLED on Ctrl-C. Figures that cannot be drawn
are one warning line; a store that cannot take them fails the job (one line, exit 1).
"""

from __future__ import annotations

import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Iterator, List, Optional

import mlflow
import pandas as pd
from omegaconf import DictConfig

from emergence.config import refines, trains_live
from emergence.console import interrupted_line
from emergence.common.contract import FRACTION, parse_metric
from emergence.common.store import StoreError, log_artifacts_whole
from emergence.screening import JobFailed, sweep_id
from emergence.tracking import Tracker, config_hash, end_parent, parent_heartbeat, start_parent

#: Where the figures go in the parent run's artifacts.
FIGURES_DIR = "curves"


class JobParent:
    """The open parent run of a job: its id, and the job's results once it has them."""

    def __init__(self, run_id: Optional[str]):
        self.run_id = run_id
        self.results: List = []


def all_finished(cfg: DictConfig, revisions: List) -> bool:
    """Whether every selected revision already has a complete, FINISHED run of this identity (then the
    job screens nothing and opens no parent run: a rerun adds no run); never with ``force`` or a
    refinement (which plans new revisions)."""
    if cfg.force or refines(cfg) or not revisions:
        return False
    tracker = Tracker(cfg.tracking)
    return all(tracker.finished_run(config_hash(cfg, r)) is not None for r in revisions)


@contextmanager
def job_parent(cfg: DictConfig, revisions: List) -> Iterator[JobParent]:
    """Open the job's parent run (module notes) for the ``revisions`` its plan selected (none when the
    sweeper gave it one, for a live job, or when every run is finished); the job's runs name the
    ``run_id`` it yields; set ``.results`` on it to get the figures; the run is ended on leaving."""
    revisions = list(revisions or [])
    if cfg.tracking.parent_run or trains_live(cfg) or all_finished(cfg, revisions):
        yield JobParent(None)
        return
    n = len(revisions)
    t = cfg.tracking
    name = f"job {time.strftime('%Y-%m-%d %H:%M:%S')}: {cfg.model.name}, {cfg.revision.select} ({n} revisions)"
    _, run_id = start_parent(t.uri, t.experiment, t.artifacts, sweep_id(cfg), name, str(cfg.model.name), 1,
                             float(t.stale_after_s))
    parent = JobParent(run_id)
    try:
        with parent_heartbeat(t.uri, run_id, float(t.heartbeat_s)):
            yield parent
    except KeyboardInterrupt:
        end_parent(t.uri, run_id, ["job interrupted (KeyboardInterrupt)"], status="KILLED")
        print(interrupted_line(finished_children(t.uri, run_id), n, "revision(s)"), file=sys.stderr)
        raise
    except JobFailed as exc:
        log_figures(t.uri, run_id, exc.results)
        end_parent(t.uri, run_id, [str(exc)])
        raise
    except BaseException as exc:
        end_parent(t.uri, run_id, [f"{type(exc).__name__}: {exc}"])
        raise
    try:
        log_figures(t.uri, run_id, parent.results)
    except StoreError as exc:
        end_parent(t.uri, run_id, [str(exc)])
        raise
    end_parent(t.uri, run_id, [], strict=True)


def curve_table(results: Iterable) -> pd.DataFrame:
    """One row per screened revision with metrics (``RevisionResult``): ``model`` (its label, the
    seed included for a seed suite), ``revision``, ``tokens`` and every ``fraction.<class>``."""
    rows = []
    for r in results:
        if not r.metrics:
            continue  # held by another sweep: no metrics here
        row = {"model": getattr(r, "label", "") or r.model, "revision": r.revision.name, "tokens": int(r.revision.tokens)}
        row.update({k: float(v) for k, v in r.metrics.items() if (p := parse_metric(k)) is not None and p.kind == FRACTION})
        rows.append(row)
    table = pd.DataFrame(rows)
    if table.empty:
        return table
    return table.drop_duplicates(["model", "revision"], keep="last").sort_values(["model", "tokens"]).reset_index(drop=True)


def finished_children(uri: str, run_id: str) -> int:
    """How many runs under the parent ``run_id`` are FINISHED (0 when the store cannot say)."""
    try:
        client = mlflow.MlflowClient(uri)
        runs = client.search_runs(
            [client.get_run(run_id).info.experiment_id],
            filter_string=f"tags.`mlflow.parentRunId` = '{run_id}' and attributes.status = 'FINISHED'", max_results=10000)
    except Exception:  # noqa: BLE001  (a line to print: the runs themselves are safe)
        return 0
    return len(runs)


def log_figures(uri: str, run_id: str, results: Iterable) -> None:
    """Draw the curves of ``results`` (:func:`curve_table`, :func:`stats.figures.fraction_figures`) and
    log them into the run ``run_id`` under ``curves/`` (a one-line warning when drawing failed). A store
    that cannot take them raises :class:`StoreError` (one line) with what it took removed."""
    table = curve_table(results)
    if table.empty:
        return
    with tempfile.TemporaryDirectory() as tmp:
        try:
            from stats.figures import fraction_figures  # (matplotlib: only when figures are drawn)

            fraction_figures(table, Path(tmp))
        except Exception as exc:  # noqa: BLE001  (a convenience: the runs hold the data)
            print(f"warning: the parent run's figures were not drawn: {type(exc).__name__}: {exc}".splitlines()[0],
                  file=sys.stderr)
            return
        log_artifacts_whole(mlflow.MlflowClient(uri), uri, run_id, tmp, FIGURES_DIR)
