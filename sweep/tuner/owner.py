"""One driver owns a sweep directory while it runs: ``mjp sweep run`` and ``mjp sweep resume``
hold an exclusive ``flock`` on the experiment directory itself until they end, and a second run
or resume of the same directory is refused in one line naming the holder (pid, host, since), as
the holder wrote it into ``<experiment dir>/mjp_sweep.lock``. The lock is the directory's, not
that file's: deleting the file (or making it anew) while a sweep runs frees nothing, where a lock
on the file let a second resume lock a new file beside the running one.

The kernel drops the lock when its process ends, however it ends (SIGKILL, a lost session): a
lock never outlives its driver, so there is nothing stale to clean up. A sweep kept in a bucket
(``s3://``, ``gs://``) has no file to lock; its lock is a file in ``$MJP_HOME/locks`` (else
``~/.config/mjp/locks``) named by a digest of the directory's URI, which protects the drivers of
one machine: on a cluster, the head, where every Ray job's driver runs. Two drivers on two
machines against one bucket are not seen.

The driver is also named in the MLflow store, in the parent run's ``mjp.driver`` tag (``run`` and
each ``resume`` write ``driver_tag()``), for ``mjp sweep status`` to tell a RUNNING sweep whose
driver is gone (SIGKILL, a lost machine) from one that runs (``driver_alive``): ``host:IDENTITY``,
the driver's ``process_identity.identity()`` (boot, pid namespace, pid, start time), so that a pid
Linux has since handed to another process does not read as the driver. Drivers before it, and one
whose ``/proc`` could not name it, wrote ``host:pid``, still read (there a reused pid reads as
alive). This module imports neither Ray nor MLflow.
"""

from __future__ import annotations

import hashlib
import os
import socket
import stat
import time
from pathlib import Path

from trainables.errors import UserError
from trainables.process_identity import identity, identity_running, is_running

LOCK_FILE = "mjp_sweep.lock"

_HELD: dict[str, tuple[int, ...]] = {}  # experiment dir -> the open descriptors holding its lock and its note


def lock_path(experiment_dir: str) -> Path:
    """The file whose ``flock`` owns ``experiment_dir`` (in it when local; else under ``$MJP_HOME``)."""
    if "://" not in experiment_dir:
        return Path(experiment_dir) / LOCK_FILE
    from sweep.security.signatures import key_path

    digest = hashlib.sha256(experiment_dir.rstrip("/").encode()).hexdigest()[:24]
    return key_path().parent / "locks" / f"{digest}.lock"


def holder(path: Path) -> str:
    """Who holds the lock at ``path``, in words (what the holder wrote into it)."""
    try:
        text = path.read_text().strip()
    except OSError:
        text = ""
    return text or "another process (it wrote no name)"


def _key(experiment_dir: str) -> str:
    return experiment_dir.rstrip("/") if "://" in experiment_dir else str(Path(experiment_dir).resolve())


def claim(experiment_dir: str) -> None:
    """Own ``experiment_dir`` until ``release`` or this process ends; ``UserError`` naming the
    holder when another driver owns it. Nothing in the directory is written when refused."""
    import fcntl

    experiment_dir = _key(experiment_dir)
    if experiment_dir in _HELD:
        return
    path = lock_path(experiment_dir)
    if "://" in experiment_dir:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:  # never through a link: the directory may be shared, and the holder's line is written into the file
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as err:
        raise UserError(
            f"cannot lock the sweep directory {experiment_dir} ({path}: {err.strerror}); is it a sweep directory you may write?"
        ) from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1 or info.st_uid != os.getuid():
        os.close(fd)
        raise UserError(
            f"{path} is not a lock file this user made (a link, or another user's file); remove it if the sweep {experiment_dir} is yours"
        )
    # a local sweep is locked by its directory, which a running sweep's files keep from going away
    locked = fd if "://" in experiment_dir else os.open(experiment_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    held = (fd,) if locked == fd else (locked, fd)
    try:
        fcntl.flock(locked, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        for each in held:
            os.close(each)
        raise UserError(
            f"sweep {experiment_dir} is already run by {holder(path)}; wait for it to end, or stop it "
            "(Ctrl-C, or `kill <pid>`) and resume then"
        ) from None
    except OSError as err:  # ENOLCK, ENOSYS, EOPNOTSUPP: a filesystem that keeps no locks (NFS nolock, Lustre noflock)
        for each in held:
            os.close(each)
        raise UserError(
            f"cannot lock the sweep directory {experiment_dir}: its filesystem refuses flock ({err.strerror}); a sweep needs "
            "one where flock holds (docs/cluster-slurm.md, The shared folder)"
        ) from None
    since = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()} since {since}\n".encode(), 0)
    _HELD[experiment_dir] = held


def release(experiment_dir: str) -> None:
    """Give ``experiment_dir`` up (its note stays, naming the last driver)."""
    for fd in _HELD.pop(_key(experiment_dir), ()):
        os.close(fd)


def driver_tag() -> str:
    """The ``mjp.driver`` value naming this process: ``host:IDENTITY``, else ``host:pid``."""
    return f"{socket.gethostname()}:{identity() or os.getpid()}"


def driver_alive(tag: str | None) -> bool | None:
    """Whether the driver ``tag`` names still runs; None when that cannot be told here: no tag, a
    driver on another host (or boot, or pid namespace), or a ``/proc`` that cannot say."""
    if not tag or ":" not in tag:
        return None
    host, _, process = tag.rpartition(":")
    if host != socket.gethostname():
        return None
    if process.isascii() and process.isdigit():
        return is_running(int(process))
    return identity_running(process)
