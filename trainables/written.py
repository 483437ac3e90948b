"""Every file the platform writes for people or for a later command (the report's tables, CSVs and
figures, README.md and docs' results blocks, results/*.json; a data folder's manifest and shards,
a sweep's state and signatures, a Slurm job's and the twin's files, their Ray tokens (0600), the
MLflow store's copy kept in a bucket folder; the GPU check's report and the benchmarks' tables
added to BENCHMARKS.md) is replaced in one step: a
command killed while writing, or one that hits a full disk, leaves the old file or the new one,
never a torn or empty one that the next run then cannot read. The file is written in its folder without a name (Linux's
``O_TMPFILE``, so a kill while writing leaves no part behind either), then named and renamed over
its name, so a symbolic link at that name is replaced by the new file, never written through (its
target stays as it was). A file another library makes at a path of its own (a new SQLite store,
whose schema SQLAlchemy writes statement by statement, each committed on its own) is made beside
its name and published whole (``made_aside``).
"""

from __future__ import annotations

import contextlib
import glob
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from trainables.process_identity import identity, identity_running


def _mode_for(path: Path) -> int | None:
    """The old file's mode (a regular file's only), which the new ``path`` keeps; None for a new
    file, which is created 0666 less the umask (the kernel applies it: reading the umask would
    mean setting it, for every thread of the process)."""
    try:
        old = path.lstat()
        if stat.S_ISREG(old.st_mode):
            return old.st_mode & 0o777
    except FileNotFoundError:
        pass
    return None


def _unnamed_file(folder: Path) -> tuple[int, str | None]:
    """A new file in ``folder`` for writing: without a name where the system allows (Linux's
    ``O_TMPFILE``: a process killed while writing leaves nothing), else a ``.part`` file; its
    descriptor and its name (None while it has none)."""
    try:
        return os.open(folder, os.O_TMPFILE | os.O_WRONLY, 0o666), None
    except (AttributeError, OSError):  # not Linux, or a file system without unnamed files
        part = str(folder / f".{secrets.token_hex(6)}.part")
        return os.open(part, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666), part


def _name(fd: int, name: Path) -> None:
    """Give the unnamed file ``fd`` the name ``name`` (``linkat`` of its ``/proc/self/fd`` entry,
    following it; Python calls ``linkat`` only with a directory descriptor given)."""
    folder = os.open(name.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.link(f"/proc/self/fd/{fd}", name.name, dst_dir_fd=folder, follow_symlinks=True)
    finally:
        os.close(folder)


@contextlib.contextmanager
def atomic_file(path: str | Path, binary: bool = False, mode: int | None = None) -> Iterator[IO[Any]]:
    """``with atomic_file(path) as out: ...``: ``out`` is a new file in ``path``'s folder (text in
    UTF-8, or ``binary``), unnamed while it is written; when the block ends it is flushed to disk,
    named and renamed over ``path`` (``os.replace``); when the block raises, or the disk fills,
    it is dropped and ``path`` is as it was. The file keeps the old one's mode (a new one, or one
    that replaces a link, gets the umask's); ``mode`` (0o600 for a secret) is set instead, before
    anything is written, and whatever the old file's was."""
    path = Path(path)
    if mode is None:
        mode = _mode_for(path)
    fd, part = _unnamed_file(path.parent)
    try:
        if mode is not None:
            os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8", newline="") as out:
            yield out
            out.flush()
            os.fsync(out.fileno())
            if part is None:  # named only now, for the rename
                part = str(path.parent / f".{path.name}.{secrets.token_hex(6)}.part")
                _name(out.fileno(), Path(part))
        os.replace(part, path)
    except BaseException:
        if part is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(part)
        raise


def write_atomically(path: str | Path, content: str | bytes, mode: int | None = None) -> None:
    """Write ``content`` (text in UTF-8, or bytes) to ``path`` whole or not at all (``atomic_file``;
    ``mode``: the new file's, else the old one's)."""
    with atomic_file(path, binary=isinstance(content, bytes), mode=mode) as out:
        out.write(content)


def append_atomically(path: str | Path, text: str) -> None:
    """``text`` added at the end of the text file ``path`` (made when absent), the whole file
    replaced in one step (``atomic_file``): a command killed while it appends, or one that meets a
    full disk, leaves the file as it was, never a torn last line. A link at ``path`` is neither
    read nor written through: it is replaced by a file holding ``text`` alone (reading its target
    would copy another file, perhaps a private one, into this one)."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        old = ""
    except OSError:
        if not path.is_symlink():  # ELOOP is a link's; any other error is the caller's to see
            raise
        old = ""
    else:
        with os.fdopen(fd, encoding="utf-8", newline="") as existing:
            old = existing.read()
    write_atomically(path, old + text)


def save_figure(figure: Any, path: str | Path, **savefig: Any) -> None:
    """A matplotlib figure saved to ``path`` (its format from the suffix) whole or not at all."""
    path = Path(path)
    with atomic_file(path, binary=True) as out:
        figure.savefig(out, format=path.suffix.lstrip("."), **savefig)


@contextlib.contextmanager
def made_aside(path: Path) -> Iterator[Path]:
    """``with made_aside(path) as aside: make(aside)``: ``aside`` is ``.<name>.<owner>.creating`` in
    ``path``'s folder, ``owner`` this process's ``process_identity.identity()``. When the block ends
    the file is flushed to disk and linked at ``path``, unless a file appeared there meanwhile (that
    one is kept); ``aside`` (and its SQLite journal) is then removed, as is what creators that were
    killed left aside: those whose owner no longer runs (one of another machine sharing the folder,
    whose pids mean nothing here, is left alone)."""
    prefix = f".{path.name}."
    for left in path.parent.glob(f"{glob.escape(prefix)}*.creating*"):
        if identity_running(left.name[len(prefix) :].partition(".creating")[0]) is False:
            left.unlink(missing_ok=True)
    aside = path.with_name(f"{prefix}{identity() or os.getpid()}.creating")
    parts = (aside, aside.with_name(aside.name + "-journal"))
    for part in parts:  # a killed creator's, named by a pid this process has now (where /proc cannot tell)
        part.unlink(missing_ok=True)
    try:
        yield aside
        with open(aside, "rb") as made:
            os.fsync(made.fileno())
        with contextlib.suppress(FileExistsError):
            os.link(aside, path)  # whole, at once, and never over a file that appeared meanwhile
        folder = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)
    finally:
        for part in parts:
            part.unlink(missing_ok=True)
