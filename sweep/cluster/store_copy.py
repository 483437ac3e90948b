"""The MLflow store beyond the cluster: a consistent copy of the head's SQLite file kept in the bucket
(``mjp cluster store save`` / ``restore``).

``cluster.yaml``'s head runs ``mlflow server`` on a SQLite file on its own disk, which ``ray down``
ends. The head saves a copy to ``$MJP_BUCKET/mlflow/mlflow.db`` every few minutes and a new head
starts from it; the artifacts are in the bucket already. The local twin keeps its store the same
way, in a folder that stands in for the bucket.

A copy is made with SQLite's online backup (a consistent snapshot while the server writes, its
write-ahead log included), then written to the destination whole: to a temporary name and moved
over the old copy on a path; as one object on S3, which appears only once complete.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
from pathlib import Path
from typing import Any

from trainables.errors import ConfigError
from trainables.scratch import scratch_folder
from trainables.tracking.store_file import open_store
from trainables.written import atomic_file


def filesystem_of(where: str) -> tuple[Any, str]:
    """pyarrow's file system for ``where`` (``s3://bucket/key`` or a local path) and the path in it."""
    from pyarrow import fs

    if "://" in where:
        try:
            return fs.FileSystem.from_uri(where)
        except Exception as err:  # pyarrow's ArrowInvalid / OSError: an unknown scheme, no credentials
            raise ConfigError(f"{where}: cannot open it ({str(err).splitlines()[0][:160]})") from None
    return fs.LocalFileSystem(), str(Path(where).expanduser().absolute())


def snapshot(db: Path, into: Path) -> None:
    """A consistent copy of SQLite file ``db`` at ``into``, taken while others may write to it; a
    transaction a killed server left unfinished is rolled back first (``open_store``)."""
    source = open_store(db)
    try:
        target = sqlite3.connect(into)
        try:
            source.backup(target)
        finally:
            target.close()
    finally:
        source.close()


def save_store(db: str | Path, dest: str) -> int:
    """Copy the SQLite store ``db`` to ``dest`` (whole or not at all); the bytes written."""
    db = Path(db)
    if not db.is_file():
        raise ConfigError(f"{db}: no MLflow store there to save (the server makes it on its first request)")
    filesystem, path = filesystem_of(dest)
    with scratch_folder() as tmp:  # a copy as large as the store: gone after, also after a kill, once the next is made
        copy = tmp / "mlflow.db"
        try:
            snapshot(db, copy)
        except sqlite3.DatabaseError as err:
            raise ConfigError(f"{db}: not a readable SQLite store ({err}); nothing was saved") from None
        parent = path.rsplit("/", 1)[0]
        filesystem.create_dir(parent, recursive=True)
        # on a path, whole and never through a link (``atomic_file``); on S3 an object appears once complete
        local = filesystem.type_name == "local"
        with open(copy, "rb") as src, atomic_file(path, binary=True) if local else filesystem.open_output_stream(path) as out:
            shutil.copyfileobj(src, out, 1 << 22)
        return copy.stat().st_size


#: the folder a restore downloads into, beside the store (``trainables/scratch.py``): one a
#: killed restore left, a partial copy as large as the store, goes when the next restore begins
_COPY_PREFIX = ".{}.restore-"


def restore_store(src: str, db: str | Path) -> str:
    """Make ``db`` from the kept copy ``src`` (a new store where none was kept) unless ``db``
    exists; what was done, in words.

    A store already on the head's disk is never replaced: every copy was saved from it, so it is
    at least as new as the kept one (a head restarted with its disk)."""
    db = Path(db)
    if db.exists():
        return f"kept {db}: the store on this disk is at least as new as any saved copy"
    filesystem, path = filesystem_of(src)
    from pyarrow import fs

    db.parent.mkdir(parents=True, exist_ok=True)
    if filesystem.get_file_info(path).type != fs.FileType.File:
        from trainables.tracking.store import create_store_whole

        create_store_whole(db, served=True)  # made whole here: the server would make it in place, cut short if the head stopped meanwhile
        return f"no saved store at {src}: a new store at {db}"
    # its own folder, named for this process: no name to collide or link, and a later restore knows it for abandoned once we are gone
    with scratch_folder(_COPY_PREFIX.format(db.name), db.parent) as tmp:
        copy = tmp / db.name
        with filesystem.open_input_stream(path) as inp, open(copy, "xb") as out:
            shutil.copyfileobj(inp, out, 1 << 22)
            out.flush()
            os.fsync(out.fileno())
        try:
            with contextlib.closing(sqlite3.connect(f"file:{copy}?mode=ro", uri=True)) as check:
                check.execute("PRAGMA quick_check").fetchone()
        except sqlite3.DatabaseError as err:
            raise ConfigError(f"{src}: the saved store is not a readable SQLite file ({err}); {db} was not made") from None
        try:
            os.link(copy, db)  # whole, at once, and never over a store (or a link) that appeared meanwhile
        except FileExistsError:
            return f"kept {db}: a store appeared there while the copy was read"
    return f"restored {db} from {src}"


def fingerprint(db: Path) -> tuple:
    """What changes when the server writes: the file's and its write-ahead log's size and time."""
    return tuple((p.stat().st_size, p.stat().st_mtime_ns) if p.exists() else None for p in (db, db.with_name(db.name + "-wal")))
