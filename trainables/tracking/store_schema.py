"""MLflow opening a SQLite store whose schema it did not leave whole or current, said in one line.

MLflow makes a store's schema, and brings an older store up to its own, in some 440 statements
(alembic's migrations) that SQLite commits one by one. Opening a store MLflow either finds every
table at its head revision, or makes the missing tables and migrates from the revision recorded
(an older store's usual way up), or fails with its own traceback:

- a store left part-way through that work (a command stopped while MLflow made or upgraded it;
  stores this project makes are made aside, ``create_store_whole``, but older ones were not):
  SQLAlchemy's "table ... already exists";
- every table there at an older revision (an older MLflow's store, or one cut short late): MLflow's
  "out-of-date database schema";
- a revision this MLflow does not know (a store of a newer MLflow): the same words, which mislead.

``open_schema`` opens the store as MLflow does and turns each into ``TrackingError`` naming the
store, its revision, how many runs it holds and what to do. Nothing is deleted or moved. What
``sqlite3`` alone tells (no revision yet, alembic's ``_alembic_tmp_`` tables left) ``check_store_file``
refuses first, before MLflow writes anything."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mlflow
import mlflow.store
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient
from sqlalchemy.exc import SQLAlchemyError

from trainables.tracking.store_file import TrackingError, open_store

#: what SQLite says when MLflow's migrations meet a schema another run of them left part-way
_SCHEMA_LEFT_PART_WAY = ("already exists", "no such table", "no such column", "duplicate column")


@functools.cache
def _revisions() -> tuple[str, frozenset[str]]:
    """This MLflow's head schema revision and every revision it can migrate from (read once a process)."""
    from alembic.script import ScriptDirectory

    script = ScriptDirectory(str(Path(mlflow.store.__file__).parent / "db_migrations"))
    return script.get_current_head() or "", frozenset(rev.revision for rev in script.walk_revisions())


def _state(path: Path) -> tuple[str | None, int]:
    """The store's recorded schema revision (None when it has none) and how many runs it holds."""
    with contextlib.closing(open_store(path, timeout=30)) as db:
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        row = db.execute("SELECT version_num FROM alembic_version").fetchone() if "alembic_version" in tables else None
        runs = db.execute("SELECT count(*) FROM runs").fetchone()[0] if "runs" in tables else 0
    return (row[0] if row else None), runs


def engine_disposed(uri: str) -> None:
    """MLflow's engine for ``uri`` closed and forgotten: MLflow keeps one per URI for the process,
    whose pooled connections stay on the file they opened, even once it was moved away."""
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    engine = getattr(SqlAlchemyStore, "_engine_map", {}).pop(uri, None)
    if engine is not None:
        engine.dispose()


@contextlib.contextmanager
def schema_work_unlogged() -> Iterator[None]:
    """MLflow's INFO lines about making or migrating a schema ("Creating initial MLflow database
    tables...", "Updating database tables") left out inside the block: MLflow prints them to the
    console through a handler of its own, whatever the command's logging says."""
    logger = logging.getLogger("mlflow.store.db.utils")
    level = logger.level
    logger.setLevel(max(level, logging.WARNING))
    try:
        yield
    finally:
        logger.setLevel(level)


@contextlib.contextmanager
def scratch_writes(path: Path) -> Iterator[None]:
    """Inside the block, SQLite connections to ``path``, a store being made aside, keep their rollback
    journal in memory and never wait for the disk (``synchronous=OFF``): MLflow commits its schema
    statements one by one, each else a journal file written, synced and deleted (``benchmarks/bench_store.py``:
    0.82 s and 0.81 CPU-s a store here, against 1.52 s and 1.25 CPU-s as MLflow makes one). Safe for a
    file no one else opens that is synced whole before it is published (``made_aside``): a creator
    stopped part-way leaves an aside file, which is removed, never a store."""
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    target = os.path.abspath(path)

    def scratch(connection: Any, _record: Any) -> None:
        if isinstance(connection, sqlite3.Connection) and target in (row[2] for row in connection.execute("PRAGMA database_list")):
            connection.execute("PRAGMA journal_mode = MEMORY")
            connection.execute("PRAGMA synchronous = OFF")

    event.listen(Engine, "connect", scratch)
    try:
        yield
    finally:
        event.remove(Engine, "connect", scratch)


def open_schema(uri: str, path: Path) -> None:
    """MLflow opens the SQLite store at ``path`` (``uri``): the schema made, or an older one
    migrated, as MLflow does on every open; else ``TrackingError`` in one line. A store of a newer
    MLflow is refused before MLflow touches it."""
    revision, runs = _state(path)
    head, known = _revisions()
    holds = f"it holds {runs} run{'s' if runs != 1 else ''}"
    if revision is not None and revision not in known:
        raise TrackingError(
            f"the MLflow store {path} was made by a newer MLflow than this project's {mlflow.__version__} (its schema revision "
            f"{revision} is unknown here; {holds}): open it with that MLflow, or give --uri / tracking.uri another store"
        )
    try:
        with schema_work_unlogged():  # before a failure too
            MlflowClient(uri).search_experiments(max_results=1)
    except MlflowException as err:
        if "out-of-date database schema" not in str(err):
            raise
        engine_disposed(uri)
        raise TrackingError(
            f"the MLflow store {path} has an older schema (revision {revision}) than MLflow {mlflow.__version__} reads ({head}); "
            f"{holds}. Made by an older MLflow: back it up (cp {path} {path}.bak), then upgrade it: .venv/bin/mlflow db upgrade "
            f"sqlite:///{path}. Left part-way by a command stopped while MLflow made or upgraded it (the upgrade then fails: "
            "'... already exists'): restore it from a backup or a copy, or move it away and a new store is made there"
        ) from None
    except (SQLAlchemyError, sqlite3.DatabaseError) as err:
        cause = " ".join(str(getattr(err, "orig", None) or err).split())[:120]
        if not any(words in cause for words in _SCHEMA_LEFT_PART_WAY):
            raise  # not the schema's state (a locked store, a full disk): the caller's to say
        engine_disposed(uri)
        raise TrackingError(
            f"the MLflow store {path} was left part-way through a change of its schema (revision {revision or 'none'}; "
            f"MLflow met: {cause}): a command was stopped while MLflow made or upgraded it; {holds}: restore it from a backup "
            "or a copy (`mjp cluster store restore`), or move it away and a new store is made there"
        ) from None
