"""Which process is which. A pid names a process only while it runs: Linux hands a freed pid to the
next process it starts, so a pid kept in a name or a file (a scratch folder's owner, a watched
driver) may point at a stranger later. A process is named here by the machine's boot (its
``boot_id``, new at every boot of every machine: a folder shared between machines), its pid
namespace (a container has its own pids), its pid and its start time (clock ticks since boot,
``/proc/<pid>/stat`` field 22): ``identity()`` is ``"BOOT.NS.PID.START"``, and
``identity_running`` says whether the process so named still runs, which a reused pid cannot
fake. Linux only (it reads ``/proc``); where ``/proc`` cannot answer (none, one of another pid
namespace, processes hidden by ``hidepid``) the answer is "unknown" (None).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

PROC = Path("/proc")
_IDENTITY = re.compile(r"([0-9a-f]{32})\.([0-9]+)\.([0-9]+)\.([0-9]+)", re.ASCII)


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


def _here() -> str | None:
    """``"BOOT.NS"`` of this process, or None when ``/proc`` is not this pid namespace's own (its
    ``self`` is not this process) or cannot be read."""
    try:
        if os.readlink(PROC / "self") != str(os.getpid()):
            return None
        boot = (PROC / "sys" / "kernel" / "random" / "boot_id").read_text().strip().replace("-", "")
        namespace = os.readlink(PROC / "self" / "ns" / "pid").partition("[")[2].rstrip("]")
    except OSError:
        return None
    return f"{boot}.{namespace}" if re.fullmatch(r"[0-9a-f]{32}", boot) and namespace.isascii() and namespace.isdigit() else None


def identity(pid: int | None = None) -> str | None:
    """``"BOOT.NS.PID.START"`` for ``pid`` (this process by default), as this process sees it;
    None where ``/proc`` cannot tell or the process is gone."""
    pid = os.getpid() if pid is None else pid
    here, started = _here(), start_time(pid)
    return None if here is None or started is None else f"{here}.{pid}.{started}"


def identity_running(name: str) -> bool | None:
    """Whether the process ``identity()`` named ``name`` still runs; None when that cannot be told
    here: ``name`` is not such a name, or names a process of another boot, machine or pid
    namespace, or ``/proc`` cannot tell (none; hidden by ``hidepid``)."""
    match, here = _IDENTITY.fullmatch(name), _here()
    if match is None or here is None or f"{match[1]}.{match[2]}" != here:
        return None
    pid, started = int(match[3]), int(match[4])
    if is_running(pid, started):
        return True
    if start_time(pid) is not None:
        return False  # the pid runs another process: the one named has ended
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return None  # there, but hidden from this process's /proc
    return None  # a zombie, or a process /proc does not show
