"""The local default cleans up what it started, even when its driver is killed with SIGKILL.

Ray's head processes end with the driver that started them, but its dashboard and runtime-env
agents do not: after a ``kill -9`` of ``mjp sweep run`` they stayed, listening, for minutes.
``watch_local_ray()`` starts a small detached watcher (``python -m trainables.launch.ray_cleanup PID``)
that records the driver's process tree once a second while the driver lives; when the driver
is gone it ends exactly those processes (matched by start time, ``trainables/process_identity.py``, so a reused pid is never hit):
SIGTERM, then SIGKILL after a grace period. Linux only (it reads ``/proc``); elsewhere it does
nothing.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from trainables.process_identity import PROC, is_running, start_time

#: where ``python -m`` finds this module: the folder that holds the ``trainables`` package
PROJECT_DIR = Path(__file__).resolve().parents[2]
_watching: set[int] = set()


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        tree.setdefault(ppid, []).append(int(entry.name))
    return tree


def descendants(pid: int) -> dict[int, int]:
    """``{pid: start time}`` of every process below ``pid``."""
    tree, out, todo = _children(), {}, [pid]
    while todo:
        for child in tree.get(todo.pop(), []):
            start = start_time(child)
            if start is not None:
                out[child] = start
                todo.append(child)
    return out


def end_processes(processes: dict[int, int], grace_s: float = 5.0) -> list[int]:
    """SIGTERM the still-living ``processes`` (same start time), SIGKILL what remains; their pids."""
    living = [p for p, s in processes.items() if is_running(p, s)]
    for pid in living:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(is_running(p, processes[p]) for p in living):
        time.sleep(0.1)
    for pid in living:
        if is_running(pid, processes[pid]):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
    return living


def watch(driver: int, interval_s: float = 1.0) -> None:
    """Follow ``driver``'s process tree until it dies, then end what it left behind."""
    me, driver_start = os.getpid(), start_time(driver)
    last: dict[int, int] = {}
    while is_running(driver, driver_start):
        last = {p: s for p, s in descendants(driver).items() if p != me}
        time.sleep(interval_s)
    # what the recorded processes started since the last look (a new trial's workers under the raylet)
    for pid, start in list(last.items()):
        if is_running(pid, start):
            last.update({p: s for p, s in descendants(pid).items() if p != me})
    end_processes(last)


def watch_local_ray() -> None:
    """Start the watcher for this process (the driver that started a local Ray)."""
    if not PROC.is_dir() or os.getpid() in _watching:
        return
    _watching.add(os.getpid())
    subprocess.Popen(
        [sys.executable, "-m", __spec__.name, str(os.getpid())],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        cwd=str(PROJECT_DIR),
    )


if __name__ == "__main__":
    watch(int(sys.argv[1]))
