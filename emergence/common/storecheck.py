"""Check an MLflow tracking URI before any work: a scheme MLflow knows, and a store that answers.

Both apps call :func:`store_problem` before a model is loaded or trained (also under ``dry_run``):
a problem is one line naming the key, the URI and the cause, never a traceback minutes later.

- **Scheme**: one of :data:`TRACKING_SCHEMES` (a bare path is a file store), or one a
  tracking-store plug-in registered with MLflow.
- **A local store** must be writable where it is or would be created: the database file (opened
  for writing, not changed) and the nearest existing folder on its path, probed with a temporary
  file (so the answer is the file system's: a read-only mount, a full quota); the artifact folder
  likewise. Nothing is left behind. ``writable=False`` (a store that is only read) skips this.
- **A tracking server** must answer an HTTP request to ``<uri>/health`` within ``timeout_s`` (any
  HTTP answer counts); a database server must accept a TCP connection on its port.

Standard library and :mod:`emergence.common.store` only (no torch; MLflow only for an unknown scheme).
"""

from __future__ import annotations

import os
import socket
import tempfile
import urllib.error
import urllib.request
from pathlib import Path
from typing import Optional
from urllib.parse import urlparse

from emergence.common.store import ARTIFACTS_DIR, local_store_dir, shown, sqlite_file

#: The schemes of MLflow 3's tracking-store registry (``''``: a bare path, a file store).
TRACKING_SCHEMES = ("", "file", "sqlite", "http", "https", "postgresql", "mysql", "mssql", "databricks",
                    "databricks-uc", "uc")
#: Default ports of the database schemes, for the reach check.
DB_PORTS = {"postgresql": 5432, "mysql": 3306, "mssql": 1433}
#: The valid forms, for messages.
URI_FORMS = ("sqlite:////abs/path/mlflow.db, file:///abs/folder, http(s)://host:port (a tracking server), "
             "postgresql://, mysql://, mssql:// (a database), databricks")
#: Seconds a reach check waits by default (``tracking.connect_timeout_s``).
DEFAULT_TIMEOUT_S = 10.0


def uri_scheme(uri: str) -> str:
    """The scheme of a tracking URI as MLflow's registry keys it: ``''`` for a bare path, the
    database engine for ``postgresql+psycopg2://`` and the like, else the URI's scheme."""
    if uri in ("databricks", "databricks-uc", "uc"):
        return uri
    scheme = urlparse(uri).scheme.lower()
    if len(scheme) == 1:  # a Windows drive letter: a path
        return ""
    return scheme.split("+", 1)[0]


def _plugin_scheme(uri: str) -> bool:
    """Whether a tracking-store plug-in registered this URI's scheme with MLflow."""
    try:
        from mlflow.tracking._tracking_service.utils import _tracking_store_registry
        from mlflow.utils.uri import get_uri_scheme

        return get_uri_scheme(uri) in _tracking_store_registry._registry
    except Exception:  # noqa: BLE001  (no MLflow, or its private registry moved: not known)
        return False


def scheme_problem(uri: str, key: str = "tracking.uri") -> Optional[str]:
    """Why ``uri`` is not a tracking URI MLflow can open (no I/O), or None."""
    if not uri or not str(uri).strip():
        return f"{key} is empty; valid: {URI_FORMS}"
    scheme = uri_scheme(uri)
    if scheme not in TRACKING_SCHEMES and not _plugin_scheme(uri):
        return f"{key}={shown(uri)!r} has an unknown scheme {scheme!r}; valid: {URI_FORMS}"
    if scheme == "sqlite" and not uri.startswith("sqlite:///"):
        return f"{key}={uri!r}: a SQLite store is sqlite:///<path> (three slashes, four for an absolute path)"
    if scheme in ("http", "https") and not urlparse(uri).hostname:
        return f"{key}={uri!r} names no host; valid: http(s)://host:port"
    return None


def _why(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def folder_problem(folder: Path, what: str) -> Optional[str]:
    """Why files cannot be created at ``folder`` (it may not exist yet), or None: the nearest
    existing folder on its path is probed with a temporary file, created and deleted."""
    probe = Path(folder)
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        return f"{what} {str(folder)!r} cannot be created: {str(probe)!r} is a file, not a folder"
    try:
        fd, name = tempfile.mkstemp(prefix=".emergence-write-check-", dir=probe)
        os.close(fd)
        os.unlink(name)
    except OSError as exc:
        return f"cannot write in {what} {str(folder)!r} ({str(probe)!r}: {_why(exc)})"
    return None


def file_problem(path: Path, what: str) -> Optional[str]:
    """Why the existing file ``path`` cannot be written (opened for writing, not changed), or None."""
    if path.is_dir():
        return f"{what} {str(path)!r} is a folder, not a file"
    if path.exists():
        try:
            with open(path, "r+b"):
                pass
        except OSError as exc:
            return f"cannot write to {what} {str(path)!r} ({_why(exc)})"
    return None


#: The first 16 bytes of every SQLite 3 database file.
SQLITE_HEADER = b"SQLite format 3\x00"


def sqlite_problem(path: Optional[Path]) -> Optional[str]:
    """Why the existing file ``path`` is not a SQLite database (a store must be one), or None."""
    if path is None or not path.is_file() or path.stat().st_size == 0:
        return None
    try:
        with open(path, "rb") as f:
            head = f.read(len(SQLITE_HEADER))
    except OSError as exc:
        return f"cannot read the store file {str(path)!r} ({_why(exc)})"
    if head != SQLITE_HEADER:
        return (f"the store file {str(path)!r} is not a SQLite database (damaged, or another file); point "
                "tracking.uri / source.tracking_uri at an MLflow store, or move the file away")
    return None


def _failure(exc: BaseException, timeout_s: float) -> str:
    reason = getattr(exc, "reason", exc)
    if isinstance(reason, socket.timeout) or "timed out" in str(reason):
        return f"no answer within {timeout_s:g} s"
    return reason.strerror if isinstance(reason, OSError) and reason.strerror else str(reason)


def reach_problem(uri: str, timeout_s: float) -> Optional[str]:
    """Why a tracking or database server does not answer within ``timeout_s``, or None."""
    scheme = uri_scheme(uri)
    parsed = urlparse(uri)
    try:
        if scheme in ("http", "https"):
            try:
                with urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=timeout_s):
                    pass
            except urllib.error.HTTPError:  # an answer (401, 404, 500, ...): the server is there
                pass
        elif scheme in DB_PORTS and parsed.hostname:
            with socket.create_connection((parsed.hostname, parsed.port or DB_PORTS[scheme]), timeout=timeout_s):
                pass
    except (OSError, ValueError) as exc:  # URLError is an OSError
        return f"cannot be reached ({_failure(exc, timeout_s)})"
    return None


def store_problem(uri: str, artifacts: Optional[str] = None, timeout_s: float = DEFAULT_TIMEOUT_S,
                  key: str = "tracking.uri", writable: bool = True) -> Optional[str]:
    """Why the store at ``uri`` cannot be used (module rules), as one line naming ``key``; None
    when it can. ``artifacts``: the artifact folder setting (``tracking.artifacts``)."""
    problem = scheme_problem(uri, key)
    if problem:
        return problem
    if uri_scheme(uri) in ("", "file", "sqlite"):
        db, folder = sqlite_file(uri), local_store_dir(uri)
        problem = sqlite_problem(db)
        if writable and problem is None:
            problem = (file_problem(db, "the store file") if db is not None else None) \
                or folder_problem(folder, "the store folder")
            if problem is None and not artifacts:
                problem = folder_problem(folder / ARTIFACTS_DIR, "the artifact folder")
    else:
        problem = reach_problem(uri, timeout_s)
        if problem:
            problem = f"{key}={shown(uri)!r} {problem}; start the server, check the address or raise " \
                      "tracking.connect_timeout_s"
    if problem is None and artifacts and writable and "://" not in str(artifacts):
        problem = folder_problem(Path(artifacts).expanduser().resolve(), "the artifact folder (tracking.artifacts)")
    if problem and not problem.startswith(key):
        problem = f"{key}={shown(uri)!r}: {problem}"
    return problem
