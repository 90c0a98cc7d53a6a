"""The former home of the curve readers and the curve data model, kept for callers outside ``stats``.

The names live in their homes now: :class:`~stats.tracked.Curve` and
:class:`~stats.tracked.TrackedResults` in :mod:`stats.tracked` (the read stage's results),
:func:`~stats.sources.csv.read_csv` and :func:`~stats.sources.mlflow.read_mlflow` in the source
kinds of :mod:`stats.sources`. No module of ``stats`` imports this one.
"""

from stats.sources.csv import read_csv
from stats.sources.mlflow import read_mlflow
from stats.tracked import Curve, TrackedResults

__all__ = ["Curve", "TrackedResults", "read_csv", "read_mlflow"]
