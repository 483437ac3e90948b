"""Scratch folders that outlive no process: a folder a platform process works in (a checkpoint
written for Ray to copy, a run's weights read back, a store's copy being downloaded) is removed
when its work is done, and, when the process was killed first (SIGKILL, the OOM killer, a lost
node's restart), by the next process that makes one of the same kind in the same place.

A ``TemporaryDirectory`` is removed on return and on an exception, never after a SIGKILL: each such
kill of a trial mid-checkpoint left a model's state in ``/tmp``. Here each folder is named
``<prefix><owner>-<random>``, its owner being ``process_identity.identity()`` (the machine's boot, pid
namespace, pid and start time), so a later process removes exactly the folders whose owner no
longer runs; a folder of a living process, of another machine, boot or pid namespace, or not
named so (a link included) is left alone. Where there is no ``/proc`` the folders are still removed when done, and none is reaped.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from trainables.process_identity import identity, identity_running

#: the platform's scratch folders in the system's temporary folder: ``mjp-scratch-<owner>-<random>``
SCRATCH_PREFIX = "mjp-scratch-"


def abandoned_removed(prefix: str = SCRATCH_PREFIX, parent: str | Path | None = None) -> list[Path]:
    """Remove the folders ``<prefix><owner>-*`` in ``parent`` (the system's temporary folder by
    default) whose owner process no longer runs; the folders removed."""
    parent = Path(parent if parent is not None else tempfile.gettempdir())
    removed = []
    with contextlib.suppress(OSError), os.scandir(parent) as entries:
        for entry in entries:
            if not entry.name.startswith(prefix) or not entry.is_dir(follow_symlinks=False):
                continue
            owner = entry.name[len(prefix) :].partition("-")[0]
            if identity_running(owner) is False:
                shutil.rmtree(entry.path, ignore_errors=True)
                removed.append(Path(entry.path))
    return removed


@contextlib.contextmanager
def scratch_folder(prefix: str = SCRATCH_PREFIX, parent: str | Path | None = None) -> Iterator[Path]:
    """A new empty folder ``<parent>/<prefix><owner>-<random>`` (mode 0700; ``parent`` defaults to
    the system's temporary folder) for the block, removed after it, also on an exception; the
    folders a killed process left there under the same prefix are removed first."""
    abandoned_removed(prefix, parent)
    with tempfile.TemporaryDirectory(prefix=f"{prefix}{identity() or 'unknown'}-", dir=parent) as folder:
        yield Path(folder)


def folder_for_this_process(prefix: str = SCRATCH_PREFIX) -> Path:
    """A new empty folder named as ``scratch_folder`` names them, for what lives as long as this
    process (a log its data loader's workers append to): the first scratch folder made after the
    process has ended removes it."""
    abandoned_removed(prefix)
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{identity() or 'unknown'}-"))
