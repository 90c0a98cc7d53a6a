"""Copy a store's runs into another store: a local SQLite study into a team's tracking server.

MLflow itself offers no such copy, so::

    python -m emergence.transfer sqlite:///$PWD/outputs/mlflow.db http://mlflow.example.org:5000
    python -m emergence.transfer SRC DST --experiment emergence --experiment other

copies every active run of the named experiments (default: all but ``Default``) with its times,
status, params, tags, every metric's full history (steps kept) and its artifacts (uploaded through
the destination). Sweep parents are copied first and their children re-linked. Each copy is tagged
``emergence.copied_from = <source run id>``; a run already copied is skipped, so the command can
be rerun after an interruption or after more runs were added.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from typing import Dict, List, Optional, Sequence

from emergence.common.contract import PARENT_TAG
from emergence.common.store import prepare_store, retry, store_lock

COPIED_TAG = "emergence.copied_from"


def copy_store(src: str, dst: str, experiments: Optional[Sequence[str]] = None, log=print) -> Dict[str, int]:
    """Copy the runs; returns ``{experiment: runs copied}``."""
    import mlflow
    from mlflow.entities import Metric, Param, ViewType

    with store_lock(src):
        source = mlflow.MlflowClient(src)
        names = list(experiments) if experiments else [
            e.name for e in retry(source.search_experiments, view_type=ViewType.ACTIVE_ONLY) if e.name != "Default"]
    target = mlflow.MlflowClient(dst)
    copied: Dict[str, int] = {}
    for name in names:
        exp = retry(source.get_experiment_by_name, name)
        if exp is None:
            raise ValueError(f"no experiment {name!r} in {src}")
        dst_exp = prepare_store(dst, name)
        done = {r.data.tags[COPIED_TAG]: r.info.run_id
                for r in _all(target, dst_exp) if COPIED_TAG in r.data.tags}
        runs = _all(source, exp.experiment_id)
        runs.sort(key=lambda r: (PARENT_TAG in r.data.tags, r.info.start_time))  # parents first
        n = 0
        for run in runs:
            if run.info.run_id in done:
                continue
            tags = {k: v for k, v in run.data.tags.items() if not k.startswith("mlflow.log-model")}
            if PARENT_TAG in tags:
                tags[PARENT_TAG] = done.get(tags[PARENT_TAG], tags[PARENT_TAG])
            tags[COPIED_TAG] = run.info.run_id
            new = retry(target.create_run, dst_exp, start_time=run.info.start_time, tags=tags,
                        run_name=run.info.run_name)
            rid = new.info.run_id
            params = [Param(k, v) for k, v in run.data.params.items()]
            metrics: List[Metric] = []
            for key in run.data.metrics:
                metrics += [Metric(m.key, m.value, m.timestamp, m.step)
                            for m in retry(source.get_metric_history, run.info.run_id, key)]
            for i in range(0, max(len(params), len(metrics)), 100):
                retry(target.log_batch, rid, params=params[i:i + 100], metrics=metrics[i:i + 900])
            with tempfile.TemporaryDirectory() as tmp:
                if retry(source.list_artifacts, run.info.run_id):
                    local = mlflow.artifacts.download_artifacts(run_id=run.info.run_id, dst_path=tmp,
                                                                tracking_uri=src)
                    retry(target.log_artifacts, rid, local)
            if run.info.status in ("FINISHED", "FAILED", "KILLED"):
                retry(target.set_terminated, rid, run.info.status, end_time=run.info.end_time)
            target.set_tag(rid, "mlflow.runName", run.info.run_name or tags.get("mlflow.runName", ""))
            done[run.info.run_id] = rid
            n += 1
        copied[name] = n
        log(f"{name}: {n} run(s) copied, {len(runs) - n} already there")
    return copied


def _all(client, experiment_id: str):
    out, token = [], None
    while True:
        page = retry(client.search_runs, [experiment_id], max_results=1000, page_token=token)
        out += list(page)
        token = page.token
        if not token:
            return out


def _main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m emergence.transfer",
                                     description="Copy a store's runs (params, metric histories, tags, "
                                                 "artifacts) into another store, e.g. a tracking server.")
    parser.add_argument("source", help="e.g. sqlite:////abs/path/outputs/mlflow.db")
    parser.add_argument("destination", help="e.g. http://mlflow.example.org:5000")
    parser.add_argument("--experiment", action="append", help="an experiment to copy (repeatable; default: all)")
    args = parser.parse_args(argv)
    try:
        copy_store(args.source, args.destination, args.experiment)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())
