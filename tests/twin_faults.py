"""Losing a node of the local twin as a machine is lost: the fault the twin's node-loss tests
inject (docs/cluster-local.md), kept with the tests rather than in the product."""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

from sweep.cluster.processes import command_line, session_processes


def raylet_pid(session_dir: str | Path, node_id: str) -> int:
    """The PID of the raylet of Ray node ``node_id`` in this twin (killing it is a node loss)."""
    flag = f"--node_id={node_id}".encode()
    for pid in session_processes(session_dir):
        argv = command_line(pid)
        if argv and argv[0].endswith(b"/raylet") and flag in argv:
            return pid
    raise LookupError(f"no raylet of node {node_id} runs in the local cluster {session_dir}")


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid``."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def kill_node(session_dir: str | Path, node_id: str) -> list[int]:
    """Lose worker node ``node_id`` as a machine is lost: SIGKILL its raylet and every process it
    started (its workers and agents), at once. The PIDs killed, the raylet first.

    Killing the raylet alone is not a node loss on one machine: its worker processes (a trial's
    training among them) keep running and reporting to the GCS and the driver until they notice.
    """
    raylet = raylet_pid(session_dir, node_id)
    tree, todo = [], [raylet]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(_children(pid))
    for pid in tree:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return tree
