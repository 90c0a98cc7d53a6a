"""The statistics suite called from Python: what ``python -m stats`` runs, without its command line.

:func:`run` takes a resolved :class:`stats.config.StatsConfig` (the command line composes one
with Hydra); :func:`analyse_store` builds one for the runs of a tracking store, as the
screening job does at its end (``emergence``), in its own process.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
from collections import Counter
from pathlib import Path
from typing import Optional, Sequence

from emergence.common.storecheck import store_problem
from stats.analysis import analyse
from stats.config import SourceConfig, StatsConfig, TrackingConfig, check_analysis
from stats.errors import StatsError
from stats.paths import emergence_home
from stats.report import log_to_mlflow, write_outputs
from stats.sources import get as get_source, read_source


def logs_run(conf: StatsConfig) -> bool:
    """Whether the analysis is logged as an MLflow run: ``tracking.log``, or when it is null, whether
    the source reads a tracking store (its ``store_key``): an analysis of a file writes no store."""
    if conf.tracking.log is not None:
        return bool(conf.tracking.log)
    return get_source(conf.source.kind).store_key is not None


def check_stores(conf: StatsConfig) -> None:
    """The stores the analysis reads (the source's :attr:`~stats.sources.Source.store_key`, e.g.
    ``source.tracking_uri``) and writes (``tracking.uri``, when ``tracking.log``) can be used, before
    anything is read (emergence/common/storecheck.py: a known scheme, a server that answers, a
    local store that can be written)."""
    key = get_source(conf.source.kind).store_key
    checks = [(getattr(conf.source, key), None, f"source.{key}", False)] if key and getattr(conf.source, key) else []
    if logs_run(conf):
        checks.append((conf.tracking.uri, conf.tracking.artifacts, "tracking.uri", True))
    for uri, artifacts, key, writable in checks:
        problem = store_problem(uri, artifacts, key=key, writable=writable)
        if problem:
            raise StatsError(problem)


def run(conf: StatsConfig) -> dict:
    """Run the analysis of a resolved config; return the written paths (``summary``, ``report``,
    ... and ``run_id`` when logged)."""
    check_stores(conf)
    source = get_source(conf.source.kind)
    results = read_source(conf.source)
    analysis = analyse(results, conf.analysis)
    out_dir = Path(conf.output_dir).expanduser().resolve()
    with figure_formats(conf):
        paths = write_outputs(analysis, out_dir, conf.figures.enabled, conf.analysis.progress)
    if logs_run(conf):
        params = {"source.kind": conf.source.kind, "n_boot": conf.analysis.n_boot, "seed": conf.analysis.seed,
                  "n_curves": len(analysis.curves), **source.logged(conf.source, results)}
        paths["run_id"] = log_to_mlflow(out_dir, analysis.summary(), conf.tracking.uri, conf.tracking.artifacts,
                                        conf.tracking.experiment, params)
    return paths


def figure_formats(conf: StatsConfig):
    """The context the figures are drawn in, in the formats ``figures.formats`` asks (PNG; PDF and SVG
    on request); matplotlib is imported only when figures are drawn."""
    if not conf.figures.enabled:
        return contextlib.nullcontext()
    from stats.plotstyle import paper_style

    return paper_style(conf.figures.formats)


def summary_line(paths: dict) -> str:
    """The one line ``python -m stats`` prints at its end: curves by verdict, the report, the run."""
    summary = json.loads(Path(paths["summary"]).read_text())
    shapes = Counter(c["shape"] for c in summary["curves"])
    return (f"stats: {len(summary['curves'])} curves ({', '.join(f'{v} {k}' for k, v in sorted(shapes.items()))}); "
            f"report: {paths['report']}" + (f"; mlflow run {paths['run_id']}" if paths.get("run_id") else ""))


def analyse_store(tracking_uri: str, experiment: str, models: Sequence[str], artifacts: Optional[str] = None,
                  output_dir: Optional[str] = None, progress: bool = False) -> str:
    """Analyse the complete runs of ``models`` in ``experiment`` of a store, write the report to
    ``output_dir`` (default ``<home>/outputs/stats/<date>/<time>``, as ``python -m stats``) and log
    the analysis into the same store; return :func:`summary_line`. Raises :class:`StatsError`."""
    stamp = _dt.datetime.now()
    out = output_dir or str(emergence_home() / "outputs" / "stats" / stamp.strftime("%Y-%m-%d") /
                            stamp.strftime("%H-%M-%S-%f"))
    conf = StatsConfig(source=SourceConfig(kind="mlflow", tracking_uri=tracking_uri, experiment=experiment,
                                           models=list(models)),
                       tracking=TrackingConfig(log=True, uri=tracking_uri, artifacts=artifacts),
                       output_dir=out)
    conf.analysis.progress = progress
    check_analysis(conf.analysis)
    return summary_line(run(conf))
