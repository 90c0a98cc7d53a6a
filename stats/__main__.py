"""``python -m stats``: analyse tracked runs (or a CSV) and write the report.

    python -m stats                                   # the runs of the default store
    python -m stats source=csv source.path=FILE       # curves measured elsewhere
    python -m stats source=heads_csv source.path=FILE # a per-head table (selectivity per class)
    python -m stats source=xu2026                     # the reference study's bundled per-head data
    python -m stats source.sweep=latest analysis.n_boot=2000 output_dir=/tmp/out

Config: ``conf/stats.yaml`` (schema :class:`stats.config.StatsConfig`). Writes
``summary.json``, ``tables/*.csv``, ``figures/*.png`` and ``report.md`` into
``output_dir`` (default ``<home>/outputs/stats/<date>/<time>``, home = ``$EMERGENCE_HOME`` or the cwd) and logs
the folder as one MLflow run (``tracking.log``). Bad input exits with status 2 and
one line naming the value and the valid choices.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import hydra
from omegaconf import DictConfig, OmegaConf

import stats  # noqa: F401  (registers the project_root resolver)
from stats.config import SOURCE_KINDS, StatsConfig, check_config, register_configs
from stats.errors import StatsError

register_configs()


def load_results(src):
    """Read the configured source into a :class:`~stats.curves.TrackedResults`."""
    from stats.curves import read_csv, read_mlflow
    from stats.heads import read_heads_csv

    if src.kind == "mlflow":
        if not src.tracking_uri:
            raise StatsError("source.tracking_uri is empty; set it, e.g. source.tracking_uri=sqlite:////abs/path/mlflow.db")
        return read_mlflow(src.tracking_uri, src.experiment, src.filter, src.sweep, src.models, src.status, src.read_heads)
    if src.kind == "csv":
        if not src.path:
            raise StatsError("source=csv needs source.path=FILE (a CSV with columns model,class,tokens,k,n[,layer])")
        return read_csv(Path(src.path).expanduser().resolve())
    if src.kind == "heads_csv":
        if not src.path:
            raise StatsError("source=heads_csv needs source.path=FILE (a per-head CSV with columns "
                             "model,revision,tokens,layer,head and a selectivity column per class)")
        return read_heads_csv(Path(src.path).expanduser().resolve())
    raise StatsError(f"source.kind={src.kind!r}: valid choices are {list(SOURCE_KINDS)}")


def run(conf: StatsConfig) -> dict:
    """Run the analysis of a resolved config; return the written paths."""
    from stats.analysis import analyse
    from stats.report import log_to_mlflow, write_outputs

    results = load_results(conf.source)
    analysis = analyse(results, conf.analysis)
    out_dir = Path(conf.output_dir).expanduser().resolve()
    paths = write_outputs(analysis, out_dir, conf.figures, conf.analysis.progress)
    if conf.tracking.log:
        summary = analysis.summary()
        params = {"source.kind": conf.source.kind, "n_boot": conf.analysis.n_boot, "seed": conf.analysis.seed,
                  "n_curves": len(analysis.curves)}
        if conf.source.kind in ("csv", "heads_csv"):
            params["source.path"] = results.source.get("path")
        else:
            params.update({"source.experiment": conf.source.experiment, "source.filter": conf.source.filter,
                           "source.sweep": conf.source.sweep})
        paths["run_id"] = log_to_mlflow(out_dir, summary, conf.tracking.uri, conf.tracking.artifacts,
                                        conf.tracking.experiment, params)
    return paths


@hydra.main(version_base=None, config_path=str(stats.CONF_DIR), config_name="stats")
def main(cfg: DictConfig) -> None:
    try:
        check_config(cfg)
        conf: StatsConfig = OmegaConf.to_object(cfg)
        paths = run(conf)
    except StatsError as exc:
        print(f"stats: error: {exc}", file=sys.stderr)
        sys.exit(2)
    shapes = {}
    summary = json.loads(Path(paths["summary"]).read_text())
    for c in summary["curves"]:
        shapes[c["shape"]] = shapes.get(c["shape"], 0) + 1
    print(f"stats: {len(summary['curves'])} curves ({', '.join(f'{v} {k}' for k, v in sorted(shapes.items()))}); "
          f"report: {paths['report']}" + (f"; mlflow run {paths['run_id']}" if paths.get("run_id") else ""))


def cli() -> None:
    """``python -m stats``: the command line is composed and checked first (every value of a
    ``-m`` sweep), so a wrong type, a misspelt key or a bad value is one line and exit 2."""
    from emergence.validation import precheck

    try:
        precheck(sys.argv[1:], str(stats.CONF_DIR), "stats", StatsConfig, StatsError, check_config)
    except StatsError as exc:
        print(f"stats: error: {exc}", file=sys.stderr)
        sys.exit(2)
    main()


if __name__ == "__main__":
    cli()
