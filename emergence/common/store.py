"""The MLflow store of a study: where it lives, how it is opened, written and cleaned.

Both apps write MLflow through this module (``emergence.tracking``; ``stats``: :func:`log_run`).
Standard library and MLflow only (no model code, no torch).

- **Layout.** A local store's artifacts live beside it, in ``DIR/mlartifacts/<experiment>/``
  (:func:`artifact_location`), so its folder can be moved whole (:func:`relocate_store`); a
  tracking server uses its own artifact destination.
- **Created and migrated once**, under a file lock beside a SQLite store (:func:`prepare_store`).
- **Writes retry** on SQLite's "database is locked" (:func:`retry`: many jobs, one file).
- **A failing store is one line**: an I/O failure raises :class:`StoreError` (:func:`store_io`).
- **Dead runs are ended**: a RUNNING run whose process is gone (:func:`claim_alive`) is marked
  KILLED by the next job or sweep (:func:`end_dead_runs`); :class:`Heartbeat` keeps a live run's beat.
"""

from __future__ import annotations

import logging
import os
import random
import socket
import threading
import time
from contextlib import closing, contextmanager, suppress
from pathlib import Path
from typing import Callable, Mapping, Optional
from urllib.parse import unquote, urlparse

from emergence.common.contract import (ERROR_TAG, EXPERIMENT_KIND, EXPERIMENT_KIND_TAG, HEARTBEAT_TAG, HOST_TAG,
    KIND_TAG, PID_TAG, RUN_NAME_TAG, STATUS_COMPLETE, STATUS_TAG)
from emergence.common.mlflow_ui import tags_to_set

#: Name of the artifact folder beside a local store.
ARTIFACTS_DIR = "mlartifacts"
#: The messages of a locked SQLite database (retried, never an error).
_LOCKED = ("database is locked", "database table is locked")


# --- layout ---------------------------------------------------------------------------------

def sqlite_file(tracking_uri: str) -> Optional[Path]:
    """The database file of a ``sqlite:///`` URI, absolute; None for anything else."""
    if tracking_uri.startswith("sqlite:///"):
        return Path(unquote(tracking_uri[len("sqlite:///"):].split("?")[0])).expanduser().resolve()
    return None


def local_store_dir(tracking_uri: str) -> Optional[Path]:
    """The folder of a local store (the SQLite file's folder, or the ``file:`` store
    folder itself), absolute; None for a tracking server or another database."""
    if tracking_uri.startswith("sqlite:///"):
        return sqlite_file(tracking_uri).parent
    if tracking_uri.startswith("file:"):
        return Path(unquote(urlparse(tracking_uri).path)).expanduser().resolve()
    if "://" not in tracking_uri:  # a bare path is a file store
        return Path(tracking_uri).expanduser().resolve()
    return None


def artifact_location(tracking_uri: str, experiment: str, artifacts: Optional[str] = None) -> Optional[str]:
    """The artifact location (a URI) for a new experiment of a store: ``artifacts`` (the
    ``tracking.artifacts`` setting) when given; else ``<store folder>/mlartifacts/<experiment>``
    for a local store; else (a server) None, which lets the server choose."""
    if artifacts:
        root = Path(artifacts).expanduser().resolve()
    else:
        store = local_store_dir(tracking_uri)
        if store is None:
            return None
        root = store / ARTIFACTS_DIR
    location = root / experiment
    location.mkdir(parents=True, exist_ok=True)
    return location.as_uri()


def relocate_store(db_file: str, old_folder: str) -> int:
    """After a local SQLite store's folder was moved or copied from ``old_folder``, rewrite the
    absolute artifact URIs MLflow records per experiment and per run (``file:///old/mlartifacts/...``)
    to the database's current folder. Returns the number of rows changed."""
    import sqlite3

    db = Path(db_file).expanduser().resolve()
    if not db.is_file():
        raise FileNotFoundError(f"no SQLite store at {str(db)!r}")
    old = Path(old_folder).expanduser().resolve(strict=False).as_uri()
    new = db.parent.as_uri()
    if old == new:
        return 0
    with sqlite3.connect(db) as con:
        changed = 0
        for table, column in (("experiments", "artifact_location"), ("runs", "artifact_uri")):
            cur = con.execute(f"UPDATE {table} SET {column} = ? || substr({column}, ?) WHERE {column} LIKE ?",
                              (new, len(old) + 1, old + "/%"))
            changed += cur.rowcount
    return changed


def shown(uri: str) -> str:
    """``uri`` for a message: a password in it (``user:password@host``) replaced by ``***``."""
    password = urlparse(uri).password
    return uri.replace(f":{password}@", ":***@", 1) if password else uri


# --- writes that retry on a locked SQLite database -------------------------------------------

def is_locked(exc) -> bool:
    return any(s in str(exc) for s in _LOCKED)


def _not_store_noise(record: logging.LogRecord) -> bool:
    """MLflow logs every database error with a traceback before it raises it; the error reaches
    the caller anyway (retried, or one :class:`StoreError` line), so the log record is noise."""
    text = record.getMessage()
    return not (is_locked(text) or text.startswith("SQLAlchemy database error"))


logging.getLogger("mlflow.store.db.utils").addFilter(_not_store_noise)


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


def _cause_line(exc: BaseException) -> str:
    """The line of ``exc``'s message that names the cause: unlike :func:`emergence.common.checks.first_line`
    (a text's first line as it is), the lines are stripped, blank ones and ``(raised as ...`` ones skipped,
    and an exception without such a line gives its type name."""
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
            return f"{exc.strerror or _cause_line(exc)}{where}"
        if module.startswith("sqlite3") or (module.startswith("sqlalchemy") and name in ("OperationalError",
                                                                                        "DatabaseError")):
            return _cause_line(getattr(exc, "orig", None) or exc).replace("(sqlite3.OperationalError) ", "")
        if module.startswith("requests") and name in ("ConnectionError", "Timeout", "ConnectTimeout", "ReadTimeout"):
            return f"the server does not answer ({_cause_line(exc)[:200]})"
        if name == "MlflowException":
            text = str(exc)
            if "API request to" in text and ("failed with exception" in text or "Max retries" in text):
                return f"the server does not answer ({_cause_line(exc)[:200]})"
            if getattr(exc, "error_code", "") in ("INTERNAL_ERROR", "TEMPORARILY_UNAVAILABLE"):
                return f"the server failed: {_cause_line(exc)[:300]}"
        exc = exc.__cause__ or exc.__context__
    return None


#: The stores that failed in this process (URI -> the StoreError line): a sweep's next jobs in this
#: process do not retry a store that stopped answering (:func:`failed_before`).
_FAILED: dict = {}


@contextmanager
def store_io(uri: str, what: str = "use"):
    """Turn an I/O failure of the store (:func:`io_cause`) into one :class:`StoreError` line
    (remembered for :func:`failed_before`)."""
    try:
        yield
    except StoreError as exc:
        _FAILED.setdefault(uri, str(exc))
        raise
    except Exception as exc:  # noqa: BLE001  (only I/O failures are translated; others are re-raised)
        cause = io_cause(exc)
        if cause is None:
            raise
        path = sqlite_file(uri)  # the store as the line names it: the SQLite file, else the URI (a password hidden)
        line = f"cannot {what} the MLflow store {path if path is not None else shown(uri)}: {cause}"
        _FAILED.setdefault(uri, line)
        raise StoreError(line) from exc


def failed_before(uri: str) -> Optional[str]:
    """The :class:`StoreError` line of this store's failure earlier in this process, or None."""
    return _FAILED.get(uri)


def server_timeouts(uri: str, timeout_s: float) -> None:
    """Bound how long a call to a tracking server may go unanswered: about ``timeout_s`` in all
    (3 tries of ``timeout_s / 4`` each, 1 s and 2 s apart, instead of MLflow's 7 tries over
    minutes); then the call fails and :func:`store_io` makes it one line. Nothing for a local
    store. Set through MLflow's own settings (read at each request), for this process."""
    if not uri.startswith(("http://", "https://")):
        return
    os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] = str(max(1, int(timeout_s / 4)))
    os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] = "2"
    os.environ["MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR"] = "1"
    os.environ["MLFLOW_HTTP_REQUEST_BACKOFF_JITTER"] = "0.5"


def quick_if_failed_before(uri: str) -> None:
    """One quick try (:func:`server_timeouts` of 8 s) for a store that failed earlier in this process."""
    if failed_before(uri) is not None:
        server_timeouts(uri, 8.0)


def log_artifacts_whole(client, uri: str, run_id: str, folder: str, artifact_path: str) -> None:
    """Log the files of ``folder`` under ``artifact_path`` of a run, whole or not at all: when the
    store fails midway (a full disk) what was copied is deleted and a :class:`StoreError` (one line)
    is raised, so no partial or empty artifact stays."""
    with store_io(uri, "write to"):
        try:
            retry(client.log_artifacts, run_id, folder, artifact_path)
        except Exception:
            with suppress(Exception):  # nothing was copied, or the store cannot even delete
                _delete_artifacts(client.get_run(run_id).info.artifact_uri, uri, artifact_path)
            raise


def _delete_artifacts(artifact_uri: str, tracking_uri: str, artifact_path: Optional[str] = None) -> None:
    """Delete a run's artifacts (those under ``artifact_path``; all when None)."""
    from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository

    get_artifact_repository(artifact_uri, tracking_uri=tracking_uri).delete_artifacts(artifact_path)


# --- the store ------------------------------------------------------------------------------

@contextmanager
def store_lock(uri: str, timeout: float = 900.0):
    """An exclusive file lock beside a SQLite store (``<file>.lock``); nothing for other stores."""
    path = sqlite_file(uri)
    if path is None:
        yield
        return
    from filelock import FileLock

    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path) + ".lock", timeout=timeout):
        yield


def _repair_sqlite(path: Optional[Path]) -> None:
    """Drop leftovers of an interrupted schema migration (``_alembic_tmp_<table>`` beside an
    intact ``<table>``), which otherwise keep a SQLite store from opening. Called under the lock."""
    if path is None or not path.is_file():
        return
    import sqlite3

    with closing(sqlite3.connect(path, timeout=60)) as con:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        for tmp in sorted(t for t in tables if t.startswith("_alembic_tmp_")):
            if tmp[len("_alembic_tmp_"):] in tables:
                con.execute(f'DROP TABLE "{tmp}"')
        con.commit()


def prepare_store(uri: str, experiment: str, artifacts: Optional[str] = None) -> str:
    """Create or upgrade the store and create the experiment, once, safely; returns its id.

    Under the store's file lock for SQLite (so a new store is migrated by exactly one
    process); for a server, a lost race to create the experiment re-reads it.
    """
    import mlflow
    from mlflow.exceptions import MlflowException

    with store_io(uri, "create or open"), store_lock(uri):
        _repair_sqlite(sqlite_file(uri))
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
        # The tags the MLflow UI reads (emergence/common/mlflow_ui.py), also on an experiment made before or by
        # another tool. Only the kind must be written: the primary metric and the saved view are conveniences.
        for key, value in tags_to_set(exp.tags if exp is not None else {EXPERIMENT_KIND_TAG: EXPERIMENT_KIND}).items():
            try:
                retry(client.set_experiment_tag, exp_id, key, value)
            except MlflowException:
                if key == EXPERIMENT_KIND_TAG:
                    raise
    return exp_id


def claim_alive(run, stale_after_s: float, now: Optional[float] = None) -> bool:
    """Whether a RUNNING claim's process may still be working on it: its heartbeat (else its start)
    is at most ``stale_after_s`` old and, on this host, its pid is alive."""
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
            os.kill(int(tags.get(PID_TAG, "-1")), 0)
        except (ProcessLookupError, ValueError):
            return False
        except PermissionError:  # another user's process
            pass
    return True


class Heartbeat:
    """A daemon thread that refreshes a run's heartbeat tag while its job works."""

    def __init__(self, client, run_id: str, every_s: float):
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, args=(client, run_id, every_s), daemon=True)

    def _beat(self, client, run_id: str, every_s: float) -> None:
        while not self._stop.wait(every_s):
            with suppress(Exception):  # a missed beat is retried at the next one
                retry(client.set_tag, run_id, HEARTBEAT_TAG, f"{time.time():.3f}", attempts=5)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


def is_complete(run) -> bool:
    """A run written whole: FINISHED and tagged ``emergence.status = complete``."""
    return run.info.status == "FINISHED" and run.data.tags.get(STATUS_TAG) == STATUS_COMPLETE


def drop_artifacts(run, tracking_uri: str) -> None:
    """Delete a run's artifacts (a run cleaned as an orphan may have left a partial folder):
    its artifact repository's ``delete_artifacts``, then its empty run folder when local."""
    uri = run.info.artifact_uri or ""
    with suppress(Exception):  # nothing there, or a store that cannot delete: the run is deleted anyway
        _delete_artifacts(uri, tracking_uri)
    if uri.startswith("file:"):
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
        with suppress(Exception):  # a rival cleaner got there first
            retry(client.set_tag, run.info.run_id, ERROR_TAG,
                  f"the {what}'s process ended without closing this run (killed?): host {tags.get(HOST_TAG, '?')}, "
                  f"pid {tags.get(PID_TAG, '?')}, last heartbeat {tags.get(HEARTBEAT_TAG, 'none')}")
            retry(client.set_terminated, run.info.run_id, "KILLED")
            ended.append(run.info.run_id)
    return ended


# --- one whole run (the stats run) ------------------------------------------------------------

def log_run(uri: str, experiment: str, artifacts: Optional[str], *, name: str, tags: Mapping[str, str],
            params: Mapping[str, object], metrics: Mapping[str, float], folder: Optional[Path] = None) -> str:
    """Write one finished run in one go: the experiment prepared (:func:`prepare_store`), the run
    created with ``tags`` (its name ``name``), ``params``, ``metrics`` (at step 0) and the files of
    ``folder`` as its artifacts, ended FINISHED (not tagged ``emergence.status``: that
    marks a screen run, which ``stats`` reads); every call retried on a locked
    SQLite store, an I/O failure one :class:`StoreError` line. Returns the run id."""
    import mlflow
    from mlflow.entities import Metric, Param

    exp_id = prepare_store(uri, experiment, artifacts)
    client = mlflow.MlflowClient(uri)
    stamp = int(time.time() * 1000)
    with store_io(uri, "write to"):
        run = retry(client.create_run, exp_id, run_name=name[:250], tags={**tags, RUN_NAME_TAG: name[:250]})
        rid = run.info.run_id
        retry(client.log_batch, rid, params=[Param(k, str(v)[:500]) for k, v in params.items()],
              metrics=[Metric(k, float(v), stamp, 0) for k, v in metrics.items()])
        if folder is not None:
            retry(client.log_artifacts, rid, str(folder))
        retry(client.set_terminated, rid, "FINISHED")
    return rid
