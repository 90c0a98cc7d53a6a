"""Where ``stats`` reads its curves from (``source.kind``): an MLflow store, a CSV of counts, a
per-head CSV."""

from __future__ import annotations

from pathlib import Path

from stats.config import SOURCE_KINDS
from stats.curves import read_csv, read_mlflow
from stats.errors import StatsError
from stats.heads import read_heads_csv


def read_source(src):
    """Read the configured source into a :class:`~stats.curves.TrackedResults`."""
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
