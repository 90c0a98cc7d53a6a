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


def check_stores(conf: StatsConfig) -> None:
    """The stores the analysis reads (``source.tracking_uri``) and writes (``tracking.uri``, when
    ``tracking.log``) can be used, before anything is read (emergence/contract/storecheck.py: a known
    scheme, a server that answers, a local store that can be written)."""
    from emergence.contract.storecheck import store_problem

    checks = []
    if conf.source.kind == "mlflow" and conf.source.tracking_uri:
        checks.append((conf.source.tracking_uri, None, "source.tracking_uri", False))
    if conf.tracking.log:
        checks.append((conf.tracking.uri, conf.tracking.artifacts, "tracking.uri", True))
    for uri, artifacts, key, writable in checks:
        problem = store_problem(uri, artifacts, key=key, writable=writable)
        if problem:
            raise StatsError(problem)


def run(conf: StatsConfig) -> dict:
    """Run the analysis of a resolved config; return the written paths."""
    from stats.analysis import analyse
    from stats.report import log_to_mlflow, write_outputs

    check_stores(conf)
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
        from emergence.contract.checks import discard_run_dir

        print(f"stats: error: {exc}", file=sys.stderr)
        discard_run_dir(str(stats.emergence_home() / "outputs"))  # a refused analysis leaves no Hydra log
        sys.exit(2)
    shapes = {}
    summary = json.loads(Path(paths["summary"]).read_text())
    for c in summary["curves"]:
        shapes[c["shape"]] = shapes.get(c["shape"], 0) + 1
    print(f"stats: {len(summary['curves'])} curves ({', '.join(f'{v} {k}' for k, v in sorted(shapes.items()))}); "
          f"report: {paths['report']}" + (f"; mlflow run {paths['run_id']}" if paths.get("run_id") else ""))


def with_run_dir(argv: list) -> list:
    """``argv`` with ``hydra.run.dir`` set to the ``output_dir=`` it gives (when it sets no run
    folder of its own): Hydra's record of the run (``.hydra/``, the log) then goes with the
    report, not to ``./outputs``."""
    given = [a.split("=", 1)[1] for a in argv if a.startswith("output_dir=")]
    if not given or any(a.lstrip("+").startswith("hydra.run.dir=") for a in argv) or {"-m", "--multirun"} & set(argv):
        return argv
    return [*argv, f"hydra.run.dir={given[-1]}"]


def cli() -> None:
    """``python -m stats``: the command line is composed and checked first (every value of a
    ``-m`` sweep), so a wrong type, a misspelt key or a bad value is one line and exit 2."""
    from emergence.contract.checks import precheck

    try:
        precheck(sys.argv[1:], str(stats.CONF_DIR), "stats", StatsConfig, StatsError, check_config)
    except StatsError as exc:
        print(f"stats: error: {exc}", file=sys.stderr)
        sys.exit(2)
    sys.argv = [sys.argv[0], *with_run_dir(sys.argv[1:])]
    main()


if __name__ == "__main__":
    cli()
