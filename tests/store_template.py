"""A new SQLite store in the tests starts as a copy of one migrated store.

MLflow creates a new SQLite store's tables and then runs its schema migrations (alembic, about
fifty of them): 1 to 2 s a store on 2 cores, and the suite makes well over a hundred stores. The
tables and migrations are the same every time, so :func:`install` replaces MLflow's
``_initialize_tables`` in this process with a copy (SQLite's online backup) of a store migrated
once: the template, made by MLflow's own function and kept beside the temporary files, one per
MLflow version (made again if it is missing). Everything after it is MLflow's: the store's
default experiment, its artifact root, the checks of the schema's version. Installed in the test
processes (``conftest.py``) and in the warm interpreter the commands are forked from
(``commands.py``); a test's ``mlflow server`` starts on a copy (``servers.py``); a command started
cold migrates as a user's first job does.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
from pathlib import Path


def template_path() -> Path:
    import mlflow

    return Path(tempfile.gettempdir()) / f"emergence-tests-mlflow-{mlflow.__version__}.db"


def _mlflow_initialize_tables():
    """MLflow's own table creation (also after :func:`install` replaced it)."""
    import mlflow.store.db.utils as db_utils

    return getattr(db_utils._initialize_tables, "original", db_utils._initialize_tables)


def _template() -> Path:
    """The template, made once (by MLflow's own table creation) and put in place atomically."""
    import sqlalchemy

    path = template_path()
    if not path.is_file():
        fd, partial = tempfile.mkstemp(suffix=".db", dir=path.parent)
        os.close(fd)
        engine = sqlalchemy.create_engine(f"sqlite:///{partial}")
        try:
            _mlflow_initialize_tables()(engine)
        finally:
            engine.dispose()
        os.replace(partial, path)
    return path


def new_store(path: Path) -> None:
    """Put a new, migrated SQLite store at ``path`` (a copy of the template): for a store another
    program opens, e.g. ``mlflow server``'s backend."""
    shutil.copyfile(_template(), path)


def installed() -> bool:
    import mlflow.store.db.utils as db_utils

    return hasattr(db_utils._initialize_tables, "original")


def install() -> None:
    """Make MLflow's table creation for a SQLite store a copy of the template (other databases: MLflow's)."""
    import mlflow.store.db.utils as db_utils
    from mlflow.store.model_registry import sqlalchemy_store as registry_store

    original = _mlflow_initialize_tables()

    def initialize_tables(engine):
        if engine.url.get_backend_name() != "sqlite" or engine.url.database in (None, "", ":memory:"):
            return original(engine)
        template = sqlite3.connect(_template())
        target = engine.raw_connection()
        try:
            template.backup(target.driver_connection)
        finally:
            target.close()
            template.close()

    initialize_tables.original = original
    db_utils._initialize_tables = initialize_tables
    registry_store._initialize_tables = initialize_tables
