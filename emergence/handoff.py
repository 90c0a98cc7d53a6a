"""The hand-off to ``stats``: the statistics of a job's models, in this process.

A job (or a sweep) that screened more than one revision ends with the statistics of its
models when ``stats=true``: :func:`stats_report` runs ``stats.api.analyse_store`` on the
job's store; the report lands beside the job's outputs (``${emergence_home:}/outputs/stats/...``)
and is logged into the store. A failing report never fails the job: its screens are logged.
"""

from __future__ import annotations

from typing import List

from omegaconf import DictConfig


def stats_report(cfg: DictConfig, models: List[str]) -> str:
    """The statistics of this job's models (``stats.api.analyse_store``, in this process): the
    report lands beside the job's outputs (``${emergence_home:}/outputs/stats/...``) and is logged
    into the job's store. Returns stats' one-line summary, or why it failed and how to rerun it."""
    # (the statistics stack, scipy, statsmodels and matplotlib, only when a report is asked for)
    from stats.api import analyse_store
    from stats.errors import StatsError

    try:
        return analyse_store(cfg.tracking.uri, cfg.tracking.experiment, models, cfg.tracking.artifacts)
    except Exception as exc:  # noqa: BLE001  (the screens are logged; a failing report does not fail the job)
        why = str(exc) if isinstance(exc, StatsError) else f"{type(exc).__name__}: {exc}"
        return (f"stats report failed: {why}\n  rerun it with: python -m stats source.tracking_uri={cfg.tracking.uri} "
                f"source.experiment={cfg.tracking.experiment} source.models=[{','.join(models)}]")
