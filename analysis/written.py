"""Every file the platform writes for people (the report's tables, CSVs and figures, README.md and
docs' results blocks, results/*.json) is replaced in one step: a command killed while writing, or
one that hits a full disk, leaves the old file or the new one, never a torn or empty one that the
next run then cannot read. The file is written beside its name and renamed over it, so a symbolic
link at that name is replaced by the new file, never written through (its target stays as it was).
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any


def _mode_for(path: Path) -> int:
    """The mode the new ``path`` gets: the old file's (a regular file's only), else the umask's."""
    try:
        old = path.lstat()
        if stat.S_ISREG(old.st_mode):
            return old.st_mode & 0o777
    except FileNotFoundError:
        pass
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


@contextlib.contextmanager
def atomic_file(path: str | Path, binary: bool = False) -> Iterator[IO[Any]]:
    """``with atomic_file(path) as out: ...``: ``out`` is a temporary file beside ``path`` (text
    in UTF-8, or ``binary``); when the block ends it is flushed to disk and renamed over ``path``
    (``os.replace``); when the block raises, or the disk fills, it is removed and ``path`` is as
    it was. The file keeps the old one's mode (a new one, or one that replaces a link, gets the umask's)."""
    path = Path(path)
    mode = _mode_for(path)
    fd, part = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8", newline="") as out:
            yield out
            out.flush()
            os.fsync(out.fileno())
        os.chmod(part, mode)
        os.replace(part, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(part)
        raise


def write_atomically(path: str | Path, content: str | bytes) -> None:
    """Write ``content`` (text in UTF-8, or bytes) to ``path`` whole or not at all (``atomic_file``)."""
    with atomic_file(path, binary=isinstance(content, bytes)) as out:
        out.write(content)


def save_figure(figure: Any, path: str | Path, **savefig: Any) -> None:
    """A matplotlib figure saved to ``path`` (its format from the suffix) whole or not at all."""
    path = Path(path)
    with atomic_file(path, binary=True) as out:
        figure.savefig(out, format=path.suffix.lstrip("."), **savefig)
