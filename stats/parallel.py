"""Curves analysed in parallel worker processes, with the serial results.

The per-curve analyses are independent: each draws from its own random stream
(seeded per curve, :func:`stats.analysis.analyse`), so running them in other processes
(:func:`map_tasks`: joblib's loky backend, its workers reused between calls), in any order,
gives the same results as running them one after the other.

``analysis.n_jobs``: 1 runs serially; ``k > 1`` on ``k`` processes; 0 (the default) on every
core this process may use, once there are at least :data:`MIN_PARALLEL_TASKS` tasks (a small
study is not worth a worker's start, about a second of importing).
"""

from __future__ import annotations

import os
from typing import Callable, Optional

import numpy as np

from stats.curve_analysis import CurveAnalysis, analyse_curve

#: With ``n_jobs = 0``, fewer tasks than this run serially.
MIN_PARALLEL_TASKS = 24
#: Tasks are sent to the workers in batches of about this many per worker (few pickles of the
#: shared arguments, yet the curves' uneven costs balanced over the workers).
BATCHES_PER_WORKER = 4


def workers(n_jobs: int, n_tasks: int) -> int:
    """The processes ``n_jobs`` asks for ``n_tasks`` tasks (module docstring): 1 is serial."""
    if n_jobs == 0:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        return 1 if n_tasks < MIN_PARALLEL_TASKS else min(max(1, cores), n_tasks)
    return max(1, min(int(n_jobs), n_tasks))


def seeded_analysis(curve, seed, cfg, results=None) -> CurveAnalysis:
    """:func:`~stats.curve_analysis.analyse_curve` of ``curve`` with its own stream from ``seed`` (a
    :class:`numpy.random.SeedSequence`): the task that :func:`map_tasks` runs for each curve."""
    return analyse_curve(curve, cfg, np.random.default_rng(seed), results)


def _run_batch(fn: Callable, batch: list, shared: dict) -> list:
    return [fn(*task, **shared) for task in batch]


def map_tasks(fn: Callable, tasks: list, n_jobs: int, done: Optional[Callable[[int], None]] = None,
              **shared) -> list:
    """``[fn(*task, **shared) for task in tasks]``, on :func:`workers` processes; ``fn`` a
    module-level function (workers import it), ``shared`` keyword arguments sent once a batch;
    ``done(count)``, when given, is called as tasks finish (a progress bar's update)."""
    jobs = workers(n_jobs, len(tasks))
    if jobs == 1:
        batches = [[i] for i in range(len(tasks))]
        out = (_run_batch(fn, [tasks[i]], shared) for i in range(len(tasks)))
    else:
        from joblib import Parallel, delayed

        n_batches = min(len(tasks), jobs * BATCHES_PER_WORKER)
        # interleaved batches: neighbouring tasks (one model's classes, of similar cost) in different batches
        batches = [list(range(i, len(tasks), n_batches)) for i in range(n_batches)]
        out = Parallel(n_jobs=jobs, backend="loky", return_as="generator")(
            delayed(_run_batch)(fn, [tasks[i] for i in idx], shared) for idx in batches)
    results = [None] * len(tasks)
    for idx, res in zip(batches, out):
        for i, r in zip(idx, res):
            results[i] = r
        if done is not None:
            done(len(idx))
    return results
