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

import sys

import hydra
from omegaconf import DictConfig, OmegaConf

import stats  # noqa: F401  (registers the OmegaConf resolvers of conf/stats.yaml)
from emergence.common.checks import discard_run_dir, precheck, run_folder_problem
from emergence.common.quiet import quiet_logs, take_verbose_flag
from stats.api import run, summary_line
from stats.config import StatsConfig, check_config, register_configs
from stats.errors import StatsError
from stats.paths import CONF_DIR, emergence_home

register_configs()


@hydra.main(version_base=None, config_path=str(CONF_DIR), config_name="stats")
def main(cfg: DictConfig) -> None:
    try:
        check_config(cfg)
        conf: StatsConfig = OmegaConf.to_object(cfg)
        paths = run(conf)
    except StatsError as exc:
        print(f"stats: error: {exc}", file=sys.stderr)
        discard_run_dir(str(emergence_home() / "outputs"))  # a refused analysis leaves no Hydra log
        sys.exit(2)
    print(summary_line(paths))


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
    ``-m`` sweep), so a wrong type, a misspelt key or a bad value is one line and exit 2. The
    libraries' INFO lines are off unless ``-v`` (emergence/common/quiet.py)."""
    quiet_logs(take_verbose_flag(sys.argv))
    try:
        precheck(sys.argv[1:], str(CONF_DIR), "stats", StatsConfig, StatsError, check_config)
        given = "output_dir" if any(a.startswith("output_dir=") for a in sys.argv[1:]) else None
        problem = run_folder_problem(with_run_dir(sys.argv[1:]), str(CONF_DIR), "stats", given)  # the report goes there
        if problem:
            raise StatsError(problem)
    except StatsError as exc:
        print(f"stats: error: {exc}", file=sys.stderr)
        sys.exit(2)
    sys.argv = [sys.argv[0], *with_run_dir(sys.argv[1:])]
    main()


if __name__ == "__main__":
    cli()
