"""The studies with sweeps in a SQLite MLflow store, read with ``sqlite3`` alone: a command that
needs a study's sweeps refuses a study without any in a second, before MLflow is imported (5-20 s).
Also where a tracking URI's SQLite path is made absolute (``store.tracking_uri`` uses it)."""

from __future__ import annotations

import contextlib
import os
import sqlite3
from pathlib import Path

from trainables.tracking import schema


def configured_uri(configured: str | None) -> str:
    """``configured``, else ``$MLFLOW_TRACKING_URI``, else ``sqlite:///mlflow.db``."""
    return configured or os.environ.get("MLFLOW_TRACKING_URI") or "sqlite:///mlflow.db"


def absolute_sqlite(uri: str, base_dir: str | Path | None = None) -> str:
    """A relative SQLite URI or a bare path as ``sqlite:////<absolute path>``; other URIs as given."""
    if uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):
        return "sqlite:///" + str((Path(base_dir or Path.cwd()) / uri[len("sqlite:///") :]).resolve())
    if "://" not in uri:  # a bare path: a SQLite file
        return "sqlite:///" + str((Path(base_dir or Path.cwd()) / uri).resolve())
    return uri


def sweep_studies(uri: str) -> set[str] | None:
    """The studies of the active sweep parent runs in the SQLite store ``uri``; None where that
    cannot be read this way (another kind of store, no file); ``TrackingError`` naming a file that
    is not an intact MLflow store."""
    if not uri.startswith("sqlite:///"):
        return None
    path = Path(uri[len("sqlite:///") :])
    if not path.is_file():
        return None
    from trainables.tracking.store_file import check_store_file, open_store

    check_store_file(path)  # a damaged store is named as such, not read as one without sweeps
    query = """
        SELECT DISTINCT s.value FROM tags k
        JOIN tags s ON s.run_uuid = k.run_uuid AND s.key = ?
        JOIN runs r ON r.run_uuid = k.run_uuid AND r.lifecycle_stage = 'active'
        JOIN experiments e ON e.experiment_id = r.experiment_id AND e.lifecycle_stage = 'active'
        WHERE k.key = ? AND k.value = ?"""
    try:  # opened as the check opens it: a transaction killed since then is rolled back, not read as "no sweeps"
        with contextlib.closing(open_store(path)) as db:
            return {row[0] for row in db.execute(query, (schema.TAG_STUDY, schema.TAG_KIND, schema.KIND_SWEEP))}
    except sqlite3.Error:
        return None
