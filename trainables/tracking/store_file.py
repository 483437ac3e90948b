"""Whether a SQLite file is an intact MLflow store, checked with ``sqlite3`` alone (no MLflow
import; nothing written but the rollback of a transaction a killed process left unfinished), the
error every store problem is raised as, and the lock a store is made and migrated under."""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from trainables.errors import UserError


class TrackingError(UserError):
    """The MLflow store cannot be used (missing, read-only, unreachable); the message says which and why."""


#: the first 16 bytes of every SQLite database file
SQLITE_HEADER = b"SQLite format 3\x00"


def open_store(path: Path, timeout: float = 5.0) -> sqlite3.Connection:
    """A connection to the SQLite store at ``path`` (never created), opened for writing as MLflow
    opens it, by every reader too. A process killed inside a transaction (SIGKILL, the OOM killer,
    a lost machine) leaves a hot journal (``<store>-journal``); SQLite rolls it back on the first
    read of a connection that may write, and the store is as its last commit left it. A read-only
    connection cannot, and reads such a store as unusable ("attempt to write a readonly
    database"). A file the OS will not let this process write is opened read-only."""
    return sqlite3.connect(f"file:{path}?mode=rw", uri=True, timeout=timeout)


def check_store_file(path: Path) -> None:
    """``TrackingError`` in one line naming ``path`` when the SQLite file there is not an intact
    MLflow store: empty, not SQLite, damaged (SQLite's ``quick_check``, which reads every page
    once: well under a second for a store of this project's size), without MLflow's schema, or
    left part-way through making or changing that schema (a command stopped meanwhile).

    Opened with ``open_store``: a transaction a killed process left unfinished is rolled back, and
    the check itself writes nothing."""
    what = "restore it from a copy (`mjp cluster store restore`), or move it away and give --uri / tracking.uri"
    size = path.stat().st_size
    if size == 0:
        raise TrackingError(f"the MLflow store {path} is empty (0 bytes), not an MLflow store; remove it for a new store, or {what}")
    with open(path, "rb") as fh:
        header = fh.read(len(SQLITE_HEADER))
    if header != SQLITE_HEADER:
        raise TrackingError(f"the MLflow store {path} is not a SQLite database (it does not begin with SQLite's header); {what}")
    tables: set[str] = set()
    try:
        with contextlib.closing(open_store(path, timeout=30)) as db:
            problems = [row[0] for row in db.execute("PRAGMA quick_check(3)")]
            if problems == ["ok"]:
                tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
                db.execute("SELECT version_num FROM alembic_version").fetchall()
    except sqlite3.OperationalError as err:
        if "no such table" in str(err) and {"experiments", "runs"} <= tables:
            raise TrackingError(
                f"the MLflow store {path} was cut short while MLflow made its schema (it has MLflow's first tables but no schema "
                "revision: a command was stopped as it created the store); move it away and a new store is made there"
            ) from None
        if "no such table" in str(err):
            raise TrackingError(
                f"{path} is a SQLite database but not an MLflow store (it has no MLflow schema); give --uri / tracking.uri another file"
            ) from None
        journal = path.with_name(path.name + "-journal")
        if err.sqlite_errorcode == sqlite3.SQLITE_READONLY_ROLLBACK:  # a hot journal this process cannot roll back
            raise TrackingError(
                f"the MLflow store {path} holds a transaction a killed process left unfinished ({journal}), and this "
                "process cannot write to the store to roll it back; run the command as a user who can write to it"
            ) from None
        raise TrackingError(f"the MLflow store {path} cannot be read: {str(err)[:200]}; {what}") from None
    except sqlite3.DatabaseError as err:
        raise TrackingError(f"the MLflow store {path} is damaged ({str(err)[:200]}); {what}") from None
    if problems != ["ok"]:
        raise TrackingError(f"the MLflow store {path} is damaged (SQLite's quick_check: {' '.join(problems[0].split())[:200]}); {what}")
    left = sorted(name for name in tables if name.startswith("_alembic_tmp_"))
    if left:
        raise TrackingError(
            f"the MLflow store {path} was left part-way through a change of its schema (its table {left[0]}: a command was "
            f"stopped while MLflow made or upgraded the store); {what}"
        )


@contextlib.contextmanager
def store_lock(path: Path) -> Iterator[None]:
    """An exclusive lock on the folder of a SQLite store (``flock`` on the folder itself, so no
    lock file is left beside it): two sweeps started together on a fresh store would otherwise
    both run its schema migrations, and one dies in alembic."""
    import fcntl

    fd = os.open(path.parent, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock
