"""The local twin's processes: which belong to a session, and which is its GCS.

A process belongs to the twin in ``session_dir`` when its command line names a path inside the
session (the GCS, raylets, agents and workers carry ``--temp-dir`` / session paths, the autoscaler
its config path, the MLflow server its store path), or when it is in one of the session's process
groups or sessions: the MLflow server's (its uvicorn workers name only the port) and the head's
(``ray start --head`` runs in a session of its own: Ray's client proxy names only addresses, and
Ray's workers and agents rename themselves ``ray::...`` and workers take process groups of their
own; so ``mjp cluster down`` ends them all, not a minute later when they notice their raylet gone).
"""

from __future__ import annotations

import os
from pathlib import Path

#: files in the session directory holding the process groups of the MLflow server and of the Ray head
GROUP_FILES = ("mlflow/server.pgid", "mlflow/gate.pgid", "ray-head.pgid")


def _session_groups(session: Path) -> set[int]:
    groups = set()
    for name in GROUP_FILES:
        try:
            groups.add(int((session / name).read_text()))
        except (OSError, ValueError):
            continue
    return groups


def session_processes(session_dir: str | Path) -> list[int]:
    """PIDs of this user's processes of the twin in ``session_dir`` (not this one nor its parents):
    those whose command line names a path in the session, and the session's process groups."""
    session = Path(session_dir).resolve()
    needle = str(session).encode() + b"/"  # every process names a path inside the session: /tmp/x never matches /tmp/x-2
    groups = _session_groups(session)
    mine, uid, found = _this_process_and_its_ancestors(), os.getuid(), []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in mine:
            continue
        try:
            state, _, group, sid = (entry / "stat").read_text().rsplit(")", 1)[1].split()[:4]
            if entry.stat().st_uid != uid or state == "Z":
                continue  # another user's, or ended and waiting for its parent to reap it
            # Ray's workers leave the head's process group for one of their own, under a name
            # (`ray::IDLE`) that names no path, but stay in its session (`ray start --head` and the
            # MLflow server each start one): found by either
            in_group = int(group) in groups or int(sid) in groups
            if in_group or needle in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def _this_process_and_its_ancestors() -> set[int]:
    """This process and its parents (the shell that ran `mjp cluster down --session DIR` names DIR too)."""
    pids, pid = set(), os.getpid()
    while pid > 1 and pid not in pids:
        pids.add(pid)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            break
        pid = int(stat.rsplit(")", 1)[1].split()[1])
    return pids


def command_line(pid: int) -> list[bytes]:
    """A process' arguments, read from ``/proc``; empty for one that has gone."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return []


def is_gcs(pid: int) -> bool:
    """Whether ``pid`` is a Ray GCS server (``down`` ends it after the rest of the twin)."""
    argv = command_line(pid)
    return bool(argv) and argv[0].endswith(b"/gcs_server")
