"""The folder a Slurm job keeps everything in: every node must see it and its ``flock`` must hold
across nodes (a sweep is owned by an ``flock`` on its directory, ``sweep/tuner/owner.py``).

Read from the mount table (``/proc/self/mountinfo``): a node-local filesystem (ext4, xfs, tmpfs ...)
is shared only with nodes that are this machine; NFS mounted with ``nolock`` or ``local_lock=flock``
/ ``all``, and Lustre without ``-o flock`` (``localflock`` or its default ``noflock``), give locks
that hold on one node only, or none. GPFS, BeeGFS, CephFS and NFS with its lock manager hold them
across nodes."""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from pathlib import Path

from trainables.errors import ConfigError

#: filesystems that live on one machine: a job on other nodes cannot see them
NODE_LOCAL = {"ext2", "ext3", "ext4", "xfs", "btrfs", "tmpfs", "ramfs", "overlay", "zfs", "f2fs", "vfat", "devtmpfs"}


@dataclass(frozen=True)
class Mount:
    point: str
    fstype: str
    options: frozenset[str]  # the mount's and the superblock's options, e.g. {"rw", "local_lock=none", "flock"}


def parse_mountinfo(text: str) -> list[Mount]:
    """The mounts of a ``/proc/PID/mountinfo`` text (``proc(5)``: fields, ``-``, type, source, super options)."""
    mounts = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if not sep or len(fields) < 6 or len(tail) < 3:
            continue
        point = fields[4].replace("\\040", " ").replace("\\011", "\t").replace("\\134", "\\")
        mounts.append(Mount(point, tail[0], frozenset(fields[5].split(",")) | frozenset(tail[2].split(","))))
    return mounts


def mount_of(path: Path, mounts: list[Mount]) -> Mount:
    """The mount ``path`` lies on (the longest mount point above it; the last of equals, as the kernel stacks them)."""
    text = str(path)
    best = None
    for m in mounts:
        above = text == m.point or text.startswith(m.point.rstrip("/") + "/") or m.point == "/"
        if above and (best is None or len(m.point) >= len(best.point)):
            best = m
    if best is None:
        raise ConfigError(f"{path}: on no mount of /proc/self/mountinfo")
    return best


def lock_problem(mount: Mount) -> str | None:
    """Why an ``flock`` on this mount holds on one node only (or not at all); None when it holds across nodes."""
    o = mount.options
    if mount.fstype in ("nfs", "nfs4"):
        if "nolock" in o:
            return f"NFS mounted with nolock at {mount.point}: its locks hold on one node only"
        if "local_lock=flock" in o or "local_lock=all" in o:
            how = "flock" if "local_lock=flock" in o else "all"
            return f"NFS mounted with local_lock={how} at {mount.point}: flock holds on one node only"
    if mount.fstype == "lustre" and "flock" not in o:
        how = "localflock (one node only)" if "localflock" in o else "no flock option (flock is refused)"
        return f"Lustre mounted with {how} at {mount.point}: a cluster-wide lock needs `-o flock`"
    return None


def check_shared_dir(path: Path, nodes_are_this_machine: bool, mountinfo: str | None = None) -> None:
    """``ConfigError`` in one line when ``path`` cannot hold a Slurm job's sweeps: not a writable
    directory, on a filesystem the nodes do not share, or one whose ``flock`` does not hold across nodes."""
    if not path.is_dir():
        raise ConfigError(
            f"--shared {path}: no such directory (make it on a filesystem every node mounts: the sweeps, MLflow and logs go there)"
        )
    if not os.access(path, os.W_OK | os.X_OK):
        raise ConfigError(f"--shared {path}: this user cannot write there")
    mount = mount_of(path.resolve(), parse_mountinfo(mountinfo if mountinfo is not None else Path("/proc/self/mountinfo").read_text()))
    if mount.fstype in NODE_LOCAL and not nodes_are_this_machine:
        raise ConfigError(
            f"--shared {path}: on {mount.fstype} at {mount.point}, a filesystem of this machine alone; the job's nodes "
            "need one they all mount (NFS, Lustre, GPFS, BeeGFS, CephFS)"
        )
    problem = lock_problem(mount)
    if problem:
        raise ConfigError(f"--shared {path}: {problem} (a sweep is owned by an flock on its directory; docs/cluster-slurm.md)")
    check_flock(path)


def check_flock(path: Path) -> None:
    """Take and drop an ``flock`` on ``path``: ``ConfigError`` when its filesystem refuses locks."""
    import fcntl

    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
    except BlockingIOError:
        pass  # held by someone else: the filesystem locks
    except OSError as err:
        if err.errno in (errno.ENOLCK, errno.ENOSYS, errno.EOPNOTSUPP, errno.EINVAL):
            raise ConfigError(f"--shared {path}: its filesystem refuses flock ({err.strerror}); a sweep directory needs a lock") from None
        raise
    finally:
        os.close(fd)
