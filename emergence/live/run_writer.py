"""Live screens as runs of the run contract, written by a background thread.

A live screen is logged exactly like a checkpoint screen of ``python -m emergence``
(emergence/screening.py): claimed by its identity hash, with the job's params
(:func:`emergence.screening.run_params`), every class's metrics, ``heads.csv`` and the
resolved config. A screen whose checkpoint was saved carries its index in the growing
known revisions (``registry_index``: saves come in step order, so the index never changes; its
``registry_size`` is their number when it was logged); a screen that was not saved
has an empty ``registry_index`` and the tag ``emergence.live.checkpoint = not saved``.

:class:`RunWriter` writes from a daemon thread, so a slow or unreachable store never
holds training up. A write that fails is reported once (one stderr line), kept, and
retried when the monitor next saves a checkpoint (:meth:`RunWriter.retry`); later screens
wait behind it, in order. A run already complete in the store (a resumed training
screening a step again) is not written twice.
"""

from __future__ import annotations

import functools
import queue
import sys
import threading
import time
from dataclasses import dataclass
from typing import Dict, List, Optional

import mlflow
from omegaconf import OmegaConf

from emergence import catalog
from emergence.common.checks import first_line
from emergence.common.contract import (CONFIG_HASH_TAG, MODEL_TAG, REVISION_TAG, SCREEN_TAG, SWEEP_TAG,
    TOKENS_METRIC, TOKENS_TAG)
from emergence.revisions import Revision
from emergence.screening import run_params, sweep_id
from emergence.tracking import ClaimLost, Tracker, config_hash

#: Tag of a live run: whether its checkpoint was saved.
CHECKPOINT_TAG = "emergence.live.checkpoint"


@dataclass
class LiveRecord:
    """One live screen, ready to be logged."""

    revision: Revision
    #: The known revisions when it is logged (the saved checkpoints up to it; it is among them when saved).
    known: List[Revision]
    result: object  # emergence.screens.ScreenResult
    shape: object  # n_layers, n_heads, head_dim (an ArchitectureAdapter or a namespace)
    extra_params: Dict[str, str]
    seconds: float

    @property
    def saved(self) -> bool:
        return self.revision in self.known


def report(message: str) -> None:
    print(f"live: {message}", file=sys.stderr, flush=True)


class RunWriter:
    """Logs :class:`LiveRecord` s into the store of ``cfg.tracking`` (in order, in a thread)."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.sweep = sweep_id(cfg)
        self.config_yaml = OmegaConf.to_yaml(cfg, resolve=True)
        self.backlog: List[LiveRecord] = []
        #: revision name -> run id of the runs this writer logged
        self.logged: Dict[str, str] = {}
        self.failing = False
        #: CPU time the writer spent (its thread's), for the overhead benchmark
        self.cpu_seconds = 0.0
        self._reported = False
        self._tracker = None
        self._orphans: List[str] = []
        self._queue: "queue.Queue" = queue.Queue()
        self._thread = threading.Thread(target=self._work, name="emergence-live-writer", daemon=True)
        self._thread.start()

    # -- the training thread's side
    def submit(self, record: LiveRecord) -> None:
        self._queue.put(("log", record))

    def retry(self) -> None:
        """Retry what could not be written (called at each save)."""
        if self.backlog or self.failing:
            self._queue.put(("retry", None))

    def flush(self, timeout: Optional[float] = None) -> bool:
        """Wait until everything submitted so far was tried; False on timeout."""
        done = threading.Event()
        self._queue.put(("flush", done))
        return done.wait(timeout)

    def close(self, timeout: float = 120.0) -> int:
        """Write what is left (one more try), stop the thread; returns the runs not written."""
        done = threading.Event()
        self._queue.put(("stop", done))
        if not done.wait(timeout):
            report(f"the store {self.cfg.tracking.uri} did not answer within {timeout:.0f} s; "
                     f"{len(self.backlog)} live screen(s) not logged")
            return len(self.backlog)
        if self.backlog:
            report(f"{len(self.backlog)} live screen(s) could not be logged to {self.cfg.tracking.uri}: "
                     f"{', '.join(r.revision.name for r in self.backlog[:5])}{' ...' if len(self.backlog) > 5 else ''}")
        return len(self.backlog)

    # -- the writer thread's side
    def _work(self) -> None:
        while True:
            kind, payload = self._queue.get()
            tic = time.thread_time()
            try:
                if kind == "log":
                    self.backlog.append(payload)
                    if not self.failing:
                        self._drain()
                elif kind in ("retry", "stop"):
                    self._drain()
            finally:
                self.cpu_seconds += time.thread_time() - tic
            if kind in ("flush", "stop"):
                payload.set()
            if kind == "stop":
                return

    def _drain(self) -> None:
        while self.backlog:
            record = self.backlog[0]
            try:
                self._write(record)
            except Exception as exc:  # noqa: BLE001  (the store failed: reported once, kept, retried)
                self.failing = True
                if not self._reported:
                    self._reported = True
                    report(f"could not log the screen of {record.revision.name} to {self.cfg.tracking.uri} "
                             f"({type(exc).__name__}: {first_line(str(exc))}); training "
                             "goes on, and logging is retried at the next save")
                return
            self.backlog.pop(0)
            self.failing = False

    def tracker(self):
        if self._tracker is None:
            previous = mlflow.get_tracking_uri()  # the training's own MLflow logging (report_to) keeps its store
            try:
                self._tracker = Tracker(self.cfg.tracking)
            finally:
                mlflow.set_tracking_uri(previous)
        return self._tracker

    @functools.cached_property
    def run_seed(self):
        """The run seed of a seed suite's toy (:meth:`emergence.sources.ModelSource.run_seed`), or None;
        resolved once, at the first write (the model's folder exists once a save is written)."""
        return catalog.model_source(self.cfg.model).run_seed(self.cfg.model)

    def _write(self, record: LiveRecord) -> None:
        cfg, revision = self.cfg, record.revision
        tracker = self.tracker()
        for run_id in self._orphans:  # our own claims whose writing failed: FAILED, so a new claim replaces them
            tracker.fail(run_id, RuntimeError("live screen not written; retried"))
        self._orphans = []
        tags = {CONFIG_HASH_TAG: config_hash(cfg, revision), SWEEP_TAG: self.sweep, MODEL_TAG: cfg.model.name,
                REVISION_TAG: revision.name, TOKENS_TAG: str(revision.tokens), SCREEN_TAG: cfg.screen.name}
        run_id, _why = tracker.claim(tags[CONFIG_HASH_TAG], f"{cfg.model.name}@{revision.name}:{cfg.screen.name}", tags)
        if run_id is None:  # complete already (a resumed training), or another live writer holds it
            return
        try:
            params = run_params(cfg, revision, record.shape, record.known, self.run_seed)
            params.update(record.result.params)
            params.update(record.extra_params)
            metrics = dict(record.result.metrics)
            metrics.update({TOKENS_METRIC: float(revision.tokens), "train_step": float(revision.step),
                            "screen_seconds": record.seconds})
            tracker.client.set_tag(run_id, CHECKPOINT_TAG, "saved" if record.saved else "not saved")
            tracker.complete(run_id, params=params, metrics=metrics, heads=record.result.heads,
                             config_yaml=self.config_yaml, step=revision.tokens,
                             note=f"live screen of {cfg.model.name} at {revision.name} ({revision.tokens:,} tokens) "
                                  f"during training, {time.strftime('%Y-%m-%d %H:%M:%S')}; "
                                  f"checkpoint {'saved' if record.saved else 'not saved'}.")
        except ClaimLost:  # another writer completed this revision first; its run stays, ours is deleted
            return
        except BaseException:
            self._orphans.append(run_id)
            raise
        self.logged[revision.name] = run_id
