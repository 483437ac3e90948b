"""Which process is which. A pid names a process only while it runs: Linux hands a freed pid to the
next process it starts, so a pid kept in a name or a file (a scratch folder's owner, a watched
driver) may point at a stranger later. A process is named here by its pid, its start time (clock
ticks since boot, ``/proc/<pid>/stat`` field 22) and its pid namespace (a container has its own
pids): ``identity()`` is ``"NS.PID.START"``, and ``identity_running`` says whether the process so
named still runs, which a reused pid cannot fake. Linux only (it reads ``/proc``); elsewhere every
question here answers "unknown" (None).
"""

from __future__ import annotations

import os
from pathlib import Path

PROC = Path("/proc")


def start_time(pid: int) -> int | None:
    """Clock ticks since boot at which ``pid`` started; None when it is gone or a zombie (ended,
    waiting only for its parent to read its exit status) or there is no ``/proc``."""
    try:
        stat = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    return None if fields[0] in ("Z", "X") else int(fields[19])


def is_running(pid: int, started: int | None = None) -> bool:
    """Whether ``pid`` is a process that still runs (not gone, not a zombie) and, given ``started``,
    the one that started then."""
    now = start_time(pid)
    return now is not None and (started is None or now == started)


def _namespace() -> str | None:
    """This process's pid namespace, as the inode number of ``/proc/self/ns/pid``."""
    try:
        return os.readlink(PROC / "self" / "ns" / "pid").partition("[")[2].rstrip("]") or None
    except OSError:
        return None


def identity(pid: int | None = None) -> str | None:
    """``"NS.PID.START"`` for ``pid`` (this process by default), seen from this process's pid
    namespace; None where there is no ``/proc`` or the process is gone."""
    pid = os.getpid() if pid is None else pid
    ns, started = _namespace(), start_time(pid)
    return None if ns is None or started is None else f"{ns}.{pid}.{started}"


def identity_running(name: str) -> bool | None:
    """Whether the process ``identity()`` named ``name`` still runs; None when that cannot be
    told here: ``name`` is not such a name, or names a process of another pid namespace, or there
    is no ``/proc``."""
    parts = name.split(".")
    if len(parts) != 3 or not all(p.isdigit() for p in parts) or parts[0] != _namespace():
        return None
    return is_running(int(parts[1]), int(parts[2]))
