"""What a Slurm job starts besides its driver (the MLflow server, the gate, Ray's head, a step per
other node): each process in a session of its own, logged to a file, waited for until it listens
or joins, checked while the job starts, and ended whole (``JobProcesses``)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from trainables.errors import ConfigError
from trainables.process_identity import is_running


class JobProcesses:
    """What the job started, each in a session of its own; ``end`` ends them, last started first."""

    def __init__(self) -> None:
        self.started: list[tuple[str, subprocess.Popen, Path]] = []
        self.steps: list[subprocess.Popen] = []  # the `srun`s of the job's steps on its other nodes

    def start(self, what: str, command: list[str], env: dict[str, str], log: Path, *, step: bool = False) -> subprocess.Popen:
        """Start ``command``; ``step``: it is an ``srun`` of a step on another node."""
        with open(log, "ab") as out:
            process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        self.started.append((what, process, log))
        if step:
            self.steps.append(process)
        return process

    def add(self, what: str, process: subprocess.Popen, log: Path) -> None:
        self.started.append((what, process, log))

    def ended(self) -> list[str]:
        """What of the job's processes has ended."""
        return [what for what, process, _ in self.started if process.poll() is not None]

    def check_alive(self) -> None:
        """``ConfigError`` naming the first process that ended, with what its log last said (``why_it_ended``)."""
        for what, process, log in self.started:
            if process.poll() is not None:
                raise ConfigError(f"{what} ended ({process.returncode}) while the job started: {why_it_ended(log)} (log: {log})")

    def end(self, grace_s: float = 30.0) -> None:
        """End each process the job started: the steps on the other nodes first, through Slurm
        (``_end_steps``), then the rest, last started first, each session whole: SIGTERM, and
        SIGKILL to what still runs once ``grace_s`` has passed, for all of them together (a process
        that ignores SIGTERM takes no more than that from the job's clean-up)."""
        deadline = time.monotonic() + grace_s
        self._end_steps(deadline)
        for _, process, _ in reversed(self.started):
            end_all(_session_members(process.pid) | ({process.pid} if process.poll() is None else set()), deadline)
            process.poll()  # reaps our own child

    def _end_steps(self, deadline: float) -> None:
        """SIGTERM to the steps on the other nodes through Slurm (``scancel --signal``: every step of
        the job, never its batch step), then wait for their ``srun``s until ``deadline``. A SIGTERM to
        ``srun`` itself would not do: ``srun`` SIGKILLs its step then, before a node can clean up."""
        job_id = os.environ.get("SLURM_JOB_ID")
        if not job_id or all(step.poll() is not None for step in self.steps):
            return
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            subprocess.run(["scancel", "--signal=TERM", job_id], capture_output=True, timeout=max(1.0, deadline - time.monotonic()))
        while any(step.poll() is None for step in self.steps) and time.monotonic() < deadline:
            time.sleep(0.2)


def end_all(pids: set[int], deadline: float) -> None:
    """SIGTERM to ``pids``; SIGKILL to those still running at ``deadline`` (``time.monotonic()``)."""
    _signal_all(pids, signal.SIGTERM)
    while (pids := {p for p in pids if is_running(p)}) and time.monotonic() < deadline:
        time.sleep(0.2)
    _signal_all(pids, signal.SIGKILL)


def why_it_ended(log: Path, lines: int = 3) -> str:
    """The last ``lines`` lines of a process's log, in one line: what the process itself said (for
    a node, ``ray start``'s "Some Ray subprocesses exited unexpectedly" and which one), not
    ``srun``'s own note that its task exited, which ends the log of every node that failed."""
    said = [line.strip() for line in log.read_text(errors="replace").splitlines() if line.strip()] if log.is_file() else []
    own = [line for line in said if not line.startswith("srun: ")] or said
    return " / ".join(own[-lines:])[-400:] if own else "no output"


def _session_members(sid: int) -> set[int]:
    """The processes of session ``sid`` (what a process started with ``start_new_session`` became)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[4]) == sid:
                    found.add(int(entry.name))
            except (OSError, ValueError, IndexError):
                continue
    return found


def _signal_all(pids: set[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def wait_for_port(host: str, port: int, process: subprocess.Popen, what: str, log: Path, seconds: float = 180) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and process.poll() is None:
        try:
            socket.create_connection((host, port), timeout=2).close()
            return
        except OSError:
            time.sleep(0.5)
    raise ConfigError(f"{what} did not listen on {host}:{port} ({'ended' if process.poll() is not None else 'time out'}); see {log}")


_NODES_ALIVE = """
import json, sys, time
import ray
ray.init(address=sys.argv[1], log_to_driver=False, logging_level="ERROR")
want, deadline = int(sys.argv[2]), time.monotonic() + float(sys.argv[3])
while True:
    alive = {n["NodeID"]: n["RayletSocketName"] for n in ray.nodes() if n["Alive"]}
    if len(alive) >= want or time.monotonic() > deadline:
        break
    time.sleep(1)
print(json.dumps(alive))
"""


def wait_for_nodes(address: str, count: int, env: dict[str, str], processes: JobProcesses, seconds: float = 300) -> dict[str, str]:
    """``{Ray node id: its raylet's socket path}`` of the nodes that joined Ray by the time all
    ``count`` had, or ``seconds`` passed; ``ConfigError`` as soon as one of the job's processes (a
    node's ``srun``) ends meanwhile."""
    probe = subprocess.Popen(
        [sys.executable, "-c", _NODES_ALIVE, address, str(count), str(seconds)], env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        while probe.poll() is None:
            processes.check_alive()
            time.sleep(0.5)
    finally:
        if probe.poll() is None:
            probe.kill()
    lines = probe.stdout.read().splitlines() if probe.stdout else []
    try:
        alive = json.loads(lines[-1]) if probe.returncode == 0 and lines else {}
    except ValueError:
        return {}
    return alive if isinstance(alive, dict) else {}
