"""Secrets a command hands to the processes it starts by a file path (AWS keys for boto3 and
pyarrow, the token of its private local Ray), in files that cannot outlive it.

The file is an anonymous memory file (``memfd_create``) of this process, mode 0600, named by the
path ``/proc/<pid>/fd/<fd>``: every process of the same user on this machine (Ray's GCS, raylet and
workers, the trials) opens it there while this process lives; no other user can (the kernel lets
only the owner of ``/proc/<pid>/fd`` in). No name on any disk holds it, so nothing is left behind
however the process ends, SIGKILL included: its memory is freed with the process's last
descriptor. Where the system has no ``memfd_create`` (not Linux), ``None``: the caller falls back
to a private file it removes at exit (which a SIGKILL leaves behind).
"""

from __future__ import annotations

import os
from pathlib import Path

#: the descriptors of this process's secret files: open for as long as the process lives
_KEPT: list[int] = []


def process_secret_file(name: str, content: str) -> Path | None:
    """A file holding ``content`` that only this user can read and that ends with this process
    (see the module); its path, or None where the system cannot make one."""
    if not hasattr(os, "memfd_create"):
        return None
    fd = os.memfd_create(f"mjp-{name}", os.MFD_CLOEXEC)
    try:
        os.fchmod(fd, 0o600)
        data = memoryview(content.encode())
        while data:
            data = data[os.write(fd, data) :]
    except BaseException:
        os.close(fd)
        raise
    _KEPT.append(fd)
    return Path(f"/proc/{os.getpid()}/fd/{fd}")


def readable_secret(path: str) -> bool:
    """Whether this process can read a non-empty secret at ``path`` (another process's secret file
    is not, once that process ended or from another user namespace)."""
    try:
        with open(path) as fh:
            return bool(fh.read().strip())
    except OSError:
        return False
