"""Which process drives a sweep: the parent run's ``mjp.driver`` tag, written by ``mjp sweep run``
and by each ``mjp sweep resume``, and read by ``mjp sweep status`` to tell a RUNNING sweep whose
driver is gone (SIGKILL, a lost machine) from one that runs.

The tag is ``host:IDENTITY``, the driver's ``process_identity.identity()`` (boot, pid namespace,
pid, start time): a pid that Linux has handed to another process since does not read as the
driver. Drivers before it, and a driver whose ``/proc`` could not name it, wrote ``host:pid``,
which is still read (a pid alone: a reused one reads as alive). This module imports neither Ray
nor MLflow.
"""

from __future__ import annotations

import os
import socket

from trainables.process_identity import identity, identity_running, is_running


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
