"""MLflow tracking: one run per (model, revision, corpus, screen), in an experiment per study.

The rules that let many jobs (one machine, a cluster, two people) share one store:

- **The store is created and migrated once.** :func:`prepare_store` creates (or
  upgrades) the store and the experiment under a file lock beside a SQLite store
  (``<store>.db.lock``); the sweeper calls it before launching any job, and every
  job calls it before its first write, so no two processes ever run MLflow's schema
  migration or create the experiment at once. A tracking server migrates its own
  database; there only the experiment's creation is made race-free (a lost race
  re-reads the experiment).
- **A run is claimed before its screen starts** (:meth:`Tracker.claim`): the job
  creates the run, RUNNING, tagged with the identity hash (model config, revision
  name, corpus, screen), its host, pid and a heartbeat, then re-reads the live
  RUNNING runs of that hash and its complete FINISHED runs: a complete run wins
  (a rival finished while this claim was made; under ``force``, only one finished since
  this claim began), else the earliest live claim (start time, then run id); a loser
  deletes its own claim and skips the revision. With a SQLite store the whole claim
  runs under the store's file lock (atomic); with a server the re-read waits
  ``tracking.claim_settle_s`` so that a rival's earlier claim has been written. The
  same rule on every store kind: two jobs never both screen one identity.
- **Dead claims are cleaned, never duplicated.** A RUNNING claim is dead when its
  process is gone (same host and its pid is not alive) or its heartbeat (refreshed
  every ``tracking.heartbeat_s`` by the screening job) is older than
  ``tracking.stale_after_s``. A dead claim, and a FAILED or KILLED run of the same
  identity, is deleted by the next job of that identity before it claims, with its
  artifacts (a run killed while writing them leaves a partial folder); so a job
  killed by SIGKILL or Ctrl-C and rerun leaves exactly one run.
- **A dead sweep's parent run is ended.** A sweep's parent run carries the sweeper's
  host, pid and a heartbeat too (:func:`parent_heartbeat`); the next sweep or job in the
  experiment (:func:`end_dead_runs`) marks a RUNNING parent, or screen claim, whose
  process is gone KILLED, with what happened in ``emergence.error``, so ``kill -9`` of a
  sweep leaves no run RUNNING for good.
- **A run is complete or marked.** Params, metrics and artifacts are written into the
  claimed run and it is tagged ``emergence.status = complete`` last, then FINISHED;
  a screen that raises marks its run FAILED with the error in ``emergence.error``.
  A job whose hash matches a complete FINISHED run skips it (unless ``force=true``).
- **Writes retry** on SQLite's "database is locked" (many jobs, one file).
- **A failing store is one line.** An I/O failure of the store (a full disk, a read-only
  folder, a server that stopped answering) raises :class:`StoreError` naming the store
  and the cause (:func:`store_io`); what was logged before stays (each run is written
  whole or left as a claim that the next job cleans).

Metrics are logged at ``step = tokens`` (the revision's training tokens), so that
every chart over runs shares one axis across models; the training step is the
``step`` param and the ``train_step`` metric. A parent run (a ``-m`` sweep's, or a job's
without ``-m``: emergence/parent_run.py) also gets each screened revision's metrics as
curves at ``step = tokens``: ``fraction.<class>.<model>`` for every head class (so its
chart of ``fraction.bos.<model>`` is that model's BOS curve) and ``<model>/<metric>`` for
the main metrics (:data:`CURVE_METRICS`).

Every experiment the tool creates or reuses gets the tags the MLflow UI reads
(emergence/mlflow_ui.py): its kind (model development), its primary metric and a saved
view of the curves against tokens.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import socket
import threading
import time
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Callable, Dict, Iterable, Mapping, Optional, Tuple

import pandas as pd
from omegaconf import DictConfig, OmegaConf

from emergence.contract import (  # noqa: F401  (the tags are re-exported: the run contract names them)
    CONFIG_HASH_TAG, CONFIG_ARTIFACT, ERROR_TAG, HEADS_ARTIFACT, HEARTBEAT_TAG, HOST_TAG, INDUCTION_LOSS_METRIC,
    KIND_TAG, MODEL_TAG, NOTE_TAG, PARENT_TAG, PID_TAG, PR_MEAN_METRIC, RUN_NAME_TAG, STATUS_COMPLETE, STATUS_TAG, SWEEP_TAG,
    NULL_FREE_IDENTITY_KEYS, THROUGHPUT_PARAMS, artifact_location, count_metric, fraction_metric, sqlite_file,
    EXPERIMENT_KIND, EXPERIMENT_KIND_TAG, FRACTION, parse_metric)
from emergence.mlflow_ui import tags_to_set
from emergence.revisions import Revision
#: The main metrics, also logged to a sweep's parent run as ``<model>/<metric>`` curves.
CURVE_METRICS = (fraction_metric("bos"), count_metric("induction"), count_metric("bos"), INDUCTION_LOSS_METRIC,
                 PR_MEAN_METRIC, "screen_seconds")


def metric_safe(name: str) -> str:
    """``name`` as MLflow allows it in a metric key (letters, digits, ``_ - . /`` and spaces):
    other characters dropped, spaces made ``_`` (``toy_neox [seed 3]`` -> ``toy_neox_seed_3``)."""
    kept = "".join(ch for ch in name if ch.isalnum() or ch in "_-./ ")
    return "_".join(kept.split())


def curve_metrics(model: str, values: Mapping[str, float]) -> Dict[str, float]:
    """A screened revision's curves in a parent run: ``fraction.<class>.<model>`` for every
    class fraction in ``values`` and ``<model>/<metric>`` for :data:`CURVE_METRICS`."""
    model = metric_safe(model)
    out = {f"{key}.{model}": float(v) for key, v in values.items()
           if (p := parse_metric(key)) is not None and p.kind == FRACTION}
    out.update({f"{model}/{key}": float(values[key]) for key in CURVE_METRICS if key in values})
    return out

_LOCKED = ("database is locked", "database table is locked")


#: Settings that change how much goes through one forward pass, never the results:
#: left out of a run's identity, so changing them does not screen a revision again.
#: As ``{group: (key, ...)}``, from the contract's THROUGHPUT_PARAMS (``corpus.batch_size``, ...).
THROUGHPUT_KEYS: Dict[str, Tuple[str, ...]] = {}
for _name in THROUGHPUT_PARAMS:
    _group, _key = _name.split(".", 1)
    THROUGHPUT_KEYS[_group] = THROUGHPUT_KEYS.get(_group, ()) + (_key,)


def config_hash(cfg: DictConfig, revision: Revision) -> str:
    identity = {
        "model": OmegaConf.to_container(cfg.model, resolve=True),
        "revision": revision.name,
        "corpus": OmegaConf.to_container(cfg.corpus, resolve=True),
        "screen": OmegaConf.to_container(cfg.screen, resolve=True),
    }
    for group, keys in THROUGHPUT_KEYS.items():
        for key in keys:
            identity[group].pop(key, None)
    for name in NULL_FREE_IDENTITY_KEYS:  # keys added later: a null one leaves the hash as it was
        *parents, key = name.split(".")
        node = identity
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict) and node.get(key, 0) is None:
            node.pop(key)
    return hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()[:16]


def flatten(container: Mapping, prefix: str = "") -> Dict[str, str]:
    out: Dict[str, str] = {}
    for key, value in container.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, name + "."))
        else:
            out[name] = json.dumps(value) if isinstance(value, (list, tuple)) else str(value)
    return out


# --- writes that retry on a locked SQLite database -------------------------------------------

def is_locked(exc: BaseException) -> bool:
    text = str(exc)
    return any(s in text for s in _LOCKED)


class _DropStoreNoise(logging.Filter):
    """MLflow logs every database error with a traceback before it raises it; the error reaches
    the caller anyway (a locked database is retried, an I/O failure is one :class:`StoreError`
    line), so the log record is noise."""

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        return not (is_locked(text) or text.startswith("SQLAlchemy database error"))


logging.getLogger("mlflow.store.db.utils").addFilter(_DropStoreNoise())


def retry(fn: Callable, *args, attempts: int = 40, **kwargs):
    """Call ``fn``; on "database is locked" wait (growing, jittered, at most 3 s) and call again."""
    for attempt in range(attempts):
        try:
            return fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001  (MlflowException or sqlalchemy's OperationalError)
            if not is_locked(exc) or attempt == attempts - 1:
                raise
            time.sleep(min(3.0, 0.05 * 2 ** min(attempt, 6)) * (0.5 + random.random()))


class StoreError(Exception):
    """The MLflow store cannot be read or written (full disk, read-only folder, a server that
    does not answer): the message is one line naming the store and the cause."""


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip() and not line.startswith("(raised as")]
    return lines[0] if lines else type(exc).__name__


def io_cause(exc: BaseException) -> Optional[str]:
    """The I/O failure behind ``exc`` in a few words (``database or disk is full``, ``No space left
    on device: '/x/heads.csv'``, ``the server does not answer``), or None when ``exc`` is not one
    (a bug, a refused request: raised as it is)."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        name = type(exc).__name__
        module = type(exc).__module__
        if isinstance(exc, OSError):
            where = f": {exc.filename!r}" if getattr(exc, "filename", None) else ""
            return f"{exc.strerror or _first_line(exc)}{where}"
        if module.startswith("sqlite3") or (module.startswith("sqlalchemy") and name in ("OperationalError",
                                                                                        "DatabaseError")):
            return _first_line(getattr(exc, "orig", None) or exc).replace("(sqlite3.OperationalError) ", "")
        if module.startswith("requests") and name in ("ConnectionError", "Timeout", "ConnectTimeout", "ReadTimeout"):
            return f"the server does not answer ({_first_line(exc)[:200]})"
        if name == "MlflowException":
            text = str(exc)
            if "API request to" in text and ("failed with exception" in text or "Max retries" in text):
                return f"the server does not answer ({_first_line(exc)[:200]})"
            if getattr(exc, "error_code", "") in ("INTERNAL_ERROR", "TEMPORARILY_UNAVAILABLE"):
                return f"the server failed: {_first_line(exc)[:300]}"
        exc = exc.__cause__ or exc.__context__
    return None


def store_name(uri: str) -> str:
    """The store as a message names it: the SQLite file, else the URI (a password hidden)."""
    from emergence.storecheck import shown

    path = sqlite_file(uri)
    return str(path) if path is not None else shown(uri)


@contextmanager
def store_io(uri: str, what: str = "use"):
    """Turn an I/O failure of the store (:func:`io_cause`) into one :class:`StoreError` line."""
    try:
        yield
    except StoreError:
        raise
    except Exception as exc:  # noqa: BLE001  (only I/O failures are translated; others are re-raised)
        cause = io_cause(exc)
        if cause is None:
            raise
        raise StoreError(f"cannot {what} the MLflow store {store_name(uri)}: {cause}") from exc


# --- the store ------------------------------------------------------------------------------

@contextmanager
def store_lock(uri: str, timeout: float = 900.0):
    """An exclusive file lock beside a SQLite store (``<file>.lock``); nothing for other stores."""
    path = sqlite_file(uri)
    if path is None:
        with nullcontext():
            yield
        return
    from filelock import FileLock

    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path) + ".lock", timeout=timeout):
        yield


def _repair_sqlite(path: Path) -> None:
    """Drop leftovers of an interrupted schema migration (``_alembic_tmp_<table>`` beside an
    intact ``<table>``), which otherwise keep the store from opening. Called under the lock."""
    if not path.is_file():
        return
    import sqlite3

    con = sqlite3.connect(path, timeout=60)
    try:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        for tmp in sorted(t for t in tables if t.startswith("_alembic_tmp_")):
            if tmp[len("_alembic_tmp_"):] in tables:
                con.execute(f'DROP TABLE "{tmp}"')
        con.commit()
    finally:
        con.close()


def prepare_store(uri: str, experiment: str, artifacts: Optional[str] = None) -> str:
    """Create or upgrade the store and create the experiment, once, safely; returns its id.

    Under the store's file lock for SQLite (so a new store is migrated by exactly one
    process); for a server, a lost race to create the experiment re-reads it.
    """
    import mlflow
    from mlflow.exceptions import MlflowException

    with store_io(uri, "create or open"), store_lock(uri):
        path = sqlite_file(uri)
        if path is not None:
            _repair_sqlite(path)
        client = mlflow.MlflowClient(uri)
        exp = retry(client.get_experiment_by_name, experiment)
        if exp is None:
            location = artifact_location(uri, experiment, artifacts)
            try:
                exp_id = retry(client.create_experiment, experiment, artifact_location=location,
                               tags={EXPERIMENT_KIND_TAG: EXPERIMENT_KIND})
            except MlflowException:
                exp = retry(client.get_experiment_by_name, experiment)
                if exp is None:
                    raise
                exp_id = exp.experiment_id
        else:
            exp_id = exp.experiment_id
        # The tags the MLflow UI reads (emergence/mlflow_ui.py), also on an experiment made before or by
        # another tool. Only the kind must be written: the primary metric and the saved view are conveniences.
        for key, value in tags_to_set(exp.tags if exp is not None else {EXPERIMENT_KIND_TAG: EXPERIMENT_KIND}).items():
            try:
                retry(client.set_experiment_tag, exp_id, key, value)
            except MlflowException:
                if key == EXPERIMENT_KIND_TAG:
                    raise
    return exp_id


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def claim_alive(run, stale_after_s: float, now: Optional[float] = None) -> bool:
    """Whether a RUNNING claim's process may still be working on it (see the module rules)."""
    tags = run.data.tags
    now = time.time() if now is None else now
    try:
        beat = float(tags.get(HEARTBEAT_TAG, run.info.start_time / 1000.0))
    except (TypeError, ValueError):
        beat = run.info.start_time / 1000.0
    if now - beat > stale_after_s:
        return False
    if tags.get(HOST_TAG) == socket.gethostname():
        try:
            return _pid_alive(int(tags.get(PID_TAG, "-1")))
        except ValueError:
            return False
    return True


class Heartbeat:
    """A daemon thread that refreshes a run's heartbeat tag while its job works."""

    def __init__(self, client, run_id: str, every_s: float):
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, args=(client, run_id, every_s), daemon=True)

    def _beat(self, client, run_id: str, every_s: float) -> None:
        while not self._stop.wait(every_s):
            try:
                retry(client.set_tag, run_id, HEARTBEAT_TAG, f"{time.time():.3f}", attempts=5)
            except Exception:  # noqa: BLE001  (a missed beat is retried at the next one)
                pass

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


def _complete(run) -> bool:
    return run.info.status == "FINISHED" and run.data.tags.get(STATUS_TAG) == STATUS_COMPLETE


def drop_artifacts(run, tracking_uri: str) -> None:
    """Delete a run's artifacts (a run cleaned as an orphan may have left a partial folder):
    its artifact repository's ``delete_artifacts``, then its empty run folder when local."""
    uri = run.info.artifact_uri or ""
    try:
        from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository

        get_artifact_repository(uri, tracking_uri=tracking_uri).delete_artifacts()
    except Exception:  # noqa: BLE001  (nothing there, or a store that cannot delete: the run is deleted anyway)
        pass
    if uri.startswith("file:"):
        from urllib.parse import unquote, urlparse

        folder = Path(unquote(urlparse(uri).path))
        for empty in (folder, folder.parent):  # <experiment>/<run id>/artifacts, then <run id>/
            try:
                empty.rmdir()
            except OSError:
                break


def end_dead_runs(client, experiment_id: str, stale_after_s: float) -> list:
    """Mark KILLED every RUNNING run of the experiment, sweep parent or screen claim, whose
    process is gone (:func:`claim_alive`), with the reason in ``emergence.error``; returns their
    ids. A killed sweep leaves its parent RUNNING otherwise; its claims are also deleted when
    their identity is claimed again."""
    runs = retry(client.search_runs, [experiment_id], filter_string="attributes.status = 'RUNNING'",
                 max_results=5000)
    ended = []
    for run in runs:
        tags = run.data.tags
        if tags.get(KIND_TAG) not in ("sweep", "screen") or claim_alive(run, stale_after_s):
            continue
        what = "sweep" if tags.get(KIND_TAG) == "sweep" else "job"
        try:
            retry(client.set_tag, run.info.run_id, ERROR_TAG,
                  f"the {what}'s process ended without closing this run (killed?): host {tags.get(HOST_TAG, '?')}, "
                  f"pid {tags.get(PID_TAG, '?')}, last heartbeat {tags.get(HEARTBEAT_TAG, 'none')}")
            retry(client.set_terminated, run.info.run_id, "KILLED")
            ended.append(run.info.run_id)
        except Exception:  # noqa: BLE001  (a rival cleaner got there first)
            pass
    return ended


class Tracker:
    """The MLflow store and experiment of a study (``tracking`` config group).

    Every method that reads or writes the store raises :class:`StoreError` (one line) on an
    I/O failure of the store."""

    def __init__(self, tracking_cfg):
        import mlflow

        self.mlflow = mlflow
        self.uri = tracking_cfg.uri
        mlflow.set_tracking_uri(self.uri)
        self.experiment_id = prepare_store(self.uri, tracking_cfg.experiment, tracking_cfg.get("artifacts"))
        self.client = mlflow.MlflowClient(self.uri)
        self.experiment = tracking_cfg.experiment
        self.parent_run: Optional[str] = tracking_cfg.get("parent_run")
        self.heartbeat_s = float(tracking_cfg.get("heartbeat_s", 60.0))
        self.stale_after_s = float(tracking_cfg.get("stale_after_s", 600.0))
        self.settle_s = float(tracking_cfg.get("claim_settle_s", 1.0))
        #: The live run that held the identity at this job's last lost claim (None: done, or won).
        self.last_holder = None
        with self._io():
            end_dead_runs(self.client, self.experiment_id, self.stale_after_s)

    def _io(self, what: str = "use"):
        return store_io(self.uri, what)

    # -- reading
    def _runs_of(self, digest: str):
        return retry(self.client.search_runs, [self.experiment_id],
                     filter_string=f"tags.`{CONFIG_HASH_TAG}` = '{digest}'", max_results=1000)

    def finished_run(self, digest: str):
        with self._io("read"):
            runs = retry(self.client.search_runs, [self.experiment_id],
                         filter_string=f"tags.`{CONFIG_HASH_TAG}` = '{digest}' and tags.`{STATUS_TAG}` = "
                                       f"'{STATUS_COMPLETE}' and attributes.status = 'FINISHED'",
                         max_results=1)
        return runs[0] if runs else None

    def complete_runs(self, model: str):
        """Every complete, FINISHED run of ``model`` in the experiment (any corpus or screen)."""
        with self._io("read"):
            return retry(self.client.search_runs, [self.experiment_id],
                         filter_string=f"tags.`{MODEL_TAG}` = '{model}' and tags.`{STATUS_TAG}` = '{STATUS_COMPLETE}' "
                                       "and attributes.status = 'FINISHED'",
                         max_results=50000)

    # -- claiming
    def _delete(self, run) -> None:
        """Delete an orphan (or a lost claim) and its artifacts."""
        try:
            retry(self.client.delete_run, run.info.run_id)
        except Exception:  # noqa: BLE001  (already deleted by a rival cleaner)
            pass
        drop_artifacts(run, self.uri)

    def claim(self, digest: str, run_name: str, tags: Mapping[str, str],
              force: bool = False) -> Tuple[Optional[str], str]:
        """Claim the run of one identity. Returns ``(run_id, "")`` when this job is to screen
        it, ``(None, why)`` when it is done already or another job holds it (module rules; that
        job's run is then :attr:`last_holder`)."""
        self.last_holder = None
        with self._io("write to"), store_lock(self.uri):
            if not force:
                done = self.finished_run(digest)
                if done is not None:
                    return None, f"done before (run {done.info.run_id[:8]})"
            kept = set()
            for run in self._runs_of(digest):
                if _complete(run):
                    kept.add(run.info.run_id)  # force=true: kept beside the new one
                elif run.info.status == "RUNNING" and claim_alive(run, self.stale_after_s):
                    if sqlite_file(self.uri) is not None:  # under the lock: that live claim holds it
                        self.last_holder = run
                        return None, self._holder(run)
                else:
                    self._delete(run)  # dead claim, FAILED, KILLED or unfinished: an orphan
            now = time.time()
            all_tags = {**tags, RUN_NAME_TAG: run_name, HOST_TAG: socket.gethostname(), PID_TAG: str(os.getpid()),
                        HEARTBEAT_TAG: f"{now:.3f}", KIND_TAG: "screen", CONFIG_HASH_TAG: digest}
            if self.parent_run:
                all_tags[PARENT_TAG] = self.parent_run
            mine = retry(self.client.create_run, self.experiment_id, run_name=run_name, tags=all_tags)
            if sqlite_file(self.uri) is None and self.settle_s > 0:
                time.sleep(self.settle_s)
            winner = self._winner(self._runs_of(digest), mine.info.run_id, kept)
            if winner.info.run_id != mine.info.run_id:
                self._delete(mine)
                if _complete(winner):
                    return None, f"done by another job (run {winner.info.run_id[:8]})"
                self.last_holder = winner
                return None, self._holder(winner)
        return mine.info.run_id, ""

    def _winner(self, runs, mine: str, kept: set):
        """Who screens the identity, from its runs re-read after this job's claim ``mine``: a
        complete run not in ``kept`` (the complete runs seen before the claim, kept under
        ``force``; without ``force`` ``kept`` is empty), else the earliest live claim."""
        done = [r for r in runs if _complete(r) and r.info.run_id not in kept]
        if done:
            return min(done, key=lambda r: (r.info.start_time, r.info.run_id))
        live = [r for r in runs if r.info.status == "RUNNING" and r.data.tags.get(STATUS_TAG) != STATUS_COMPLETE
                and (r.info.run_id == mine or claim_alive(r, self.stale_after_s))]
        return min(live, key=lambda r: (r.info.start_time, r.info.run_id))

    @staticmethod
    def _holder(run) -> str:
        tags = run.data.tags
        return (f"claimed by another job (run {run.info.run_id[:8]}, host {tags.get(HOST_TAG, '?')}, "
                f"pid {tags.get(PID_TAG, '?')})")

    def heartbeat(self, run_id: str) -> Heartbeat:
        return Heartbeat(self.client, run_id, self.heartbeat_s)

    # -- writing a claimed run
    def complete(self, run_id: str, *, params: Mapping[str, str], metrics: Mapping[str, float],
                 heads: pd.DataFrame, config_yaml: str, step: int = 0,
                 extra_artifacts: Optional[Mapping[str, str]] = None, note: Optional[str] = None) -> None:
        """Write params, metrics (at ``step``) and artifacts into a claimed run, tag it
        complete and end it FINISHED."""
        from mlflow.entities import Metric, Param, RunTag

        stamp = int(time.time() * 1000)
        with self._io("write to"):
            retry(self.client.log_batch, run_id,
                  params=[Param(k, str(v)[:6000]) for k, v in params.items()],
                  metrics=[Metric(k, float(v), stamp, int(step)) for k, v in metrics.items()],
                  tags=[RunTag(NOTE_TAG, note)] if note else [])
            retry(self.client.log_text, run_id, heads.to_csv(index=False), HEADS_ARTIFACT)
            retry(self.client.log_text, run_id, config_yaml, CONFIG_ARTIFACT)
            for name, text in (extra_artifacts or {}).items():
                retry(self.client.log_text, run_id, text, name)
            retry(self.client.set_tag, run_id, STATUS_TAG, STATUS_COMPLETE)
            retry(self.client.set_terminated, run_id, "FINISHED")

    def fail(self, run_id: str, error: BaseException, status: str = "FAILED") -> None:
        """Mark a claimed run FAILED (or KILLED for Ctrl-C) with the error as a tag."""
        text = f"{type(error).__name__}: {error}".strip()
        try:
            retry(self.client.set_tag, run_id, ERROR_TAG, text[:4900], attempts=10)
            retry(self.client.set_terminated, run_id, status, attempts=10)
        except Exception:  # noqa: BLE001  (the store itself is failing: the claim is cleaned on resume)
            pass

    def log_curves(self, points: Iterable[Tuple[str, Mapping[str, float], int]]) -> None:
        """Log each point's curves into the parent run (a sweep's or a job's), at ``step = tokens``:
        :func:`curve_metrics`."""
        if not self.parent_run:
            return
        from mlflow.entities import Metric

        stamp = int(time.time() * 1000)
        metrics = [Metric(name, value, stamp, int(tokens))
                   for model, values, tokens in points for name, value in curve_metrics(model, values).items()]
        if metrics:
            try:
                retry(self.client.log_batch, self.parent_run, metrics=metrics)
            except Exception:  # noqa: BLE001  (the parent is a convenience; the runs hold the data)
                pass


# --- a sweep's parent run -------------------------------------------------------------------

def start_parent(uri: str, experiment: str, artifacts: Optional[str], sweep: str, name: str,
                 n_jobs: int, stale_after_s: float = 600.0) -> Tuple[str, str]:
    """Prepare the store and experiment, end the runs of dead sweeps and jobs there
    (:func:`end_dead_runs`), and create the sweep's parent run (RUNNING; the sweeper keeps its
    heartbeat with :func:`parent_heartbeat`). Returns ``(experiment_id, run_id)``."""
    import mlflow

    exp_id = prepare_store(uri, experiment, artifacts)
    client = mlflow.MlflowClient(uri)
    with store_io(uri, "write to"):
        end_dead_runs(client, exp_id, stale_after_s)
        run = retry(client.create_run, exp_id, run_name=name,
                    tags={KIND_TAG: "sweep", SWEEP_TAG: sweep, RUN_NAME_TAG: name, "emergence.jobs": str(n_jobs),
                          HOST_TAG: socket.gethostname(), PID_TAG: str(os.getpid()),
                          HEARTBEAT_TAG: f"{time.time():.3f}"})
    return exp_id, run.info.run_id


def parent_heartbeat(uri: str, run_id: str, every_s: float = 60.0) -> Heartbeat:
    """The heartbeat of a sweep's parent run, kept by the sweeper while its jobs run (a context
    manager): a sweep killed on another host is then seen dead once the beat is stale."""
    import mlflow

    return Heartbeat(mlflow.MlflowClient(uri), run_id, every_s)


def end_parent(uri: str, run_id: str, failed: Iterable[str], n_jobs: int, status: Optional[str] = None) -> None:
    """End a sweep's parent run: FINISHED, or FAILED naming the failed jobs (or ``status``)."""
    import mlflow

    client = mlflow.MlflowClient(uri)
    failed = list(failed)
    try:
        retry(client.set_tag, run_id, "emergence.failed_jobs", str(len(failed)))
        if failed:
            retry(client.set_tag, run_id, ERROR_TAG, "; ".join(failed)[:4900])
        retry(client.set_terminated, run_id, status or ("FAILED" if failed else "FINISHED"))
    except Exception:  # noqa: BLE001
        pass
