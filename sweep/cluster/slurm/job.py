"""``mjp cluster slurm-job JOB_DIR``: the whole of a Slurm sweep job, run by its batch script on the
job's first node. In order: the MLflow server on loopback with its store on the shared filesystem
(one job at a time per store: an ``flock`` on its folder), the gate on the node's address in front
of it, Ray's head, one ``srun`` step per other node joining it, then the sweep's driver: ``mjp sweep
run`` the first time, ``mjp sweep resume`` on every later start of the job (a requeue, or the same
script submitted again), which Tune and MLflow continue with every trial once.

SIGTERM (Slurm's ``--signal=B:TERM@lead`` before the time limit, preemption, ``scancel``) goes to
the driver, which closes its runs KILLED and saves Tune's state; then every process the job started
is ended (each runs in a session of its own, ended whole), and when the signal came near the time
limit the job requeues itself (``scontrol requeue``; at most ``max_restarts`` times)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType

from sweep.cluster.ports import free_port
from sweep.cluster.slurm.job_spec import SWEEPS_DIR, JobSpec
from sweep.cluster.slurm.ray_nodes import job_environment, job_nodes, node_address, ray_start, ray_temp_dir
from sweep.cluster.slurm.shape import time_limit_s
from sweep.cluster.twin import write_token
from sweep.cluster.twin_mlflow import start_gate, start_mlflow_server
from trainables.errors import ConfigError
from trainables.written import write_atomically

#: in each start's log folder: which Slurm node each Ray node id (MLflow's ``mjp.node.rank*`` tags) was
RAY_NODES_FILE = "ray-nodes.json"


class _Stopped(Exception):
    """A signal came before the driver started: the job unwinds what it started."""


class _Signals:
    """SIGTERM, SIGINT and SIGHUP: passed to the driver as SIGTERM once it runs, else ``_Stopped``."""

    def __init__(self) -> None:
        self.received: int | None = None
        self.driver: subprocess.Popen | None = None
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, self._on_signal)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        first = self.received is None
        self.received = signum
        if self.driver is None:
            raise _Stopped
        if first and self.driver.poll() is None:
            say(f"signal {signal.Signals(signum).name}: the sweep closes its runs (KILLED) and saves its state")
            self.driver.send_signal(signal.SIGTERM)


def say(text: str) -> None:
    print(f"[mjp slurm-job {time.strftime('%H:%M:%S')}] {text}", flush=True)


class _Processes:
    """What the job started, each in a session of its own; ``end`` ends them, last started first."""

    def __init__(self) -> None:
        self.started: list[tuple[str, subprocess.Popen, Path]] = []

    def start(self, what: str, command: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
        with open(log, "ab") as out:
            process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        self.started.append((what, process, log))
        return process

    def add(self, what: str, process: subprocess.Popen, log: Path) -> None:
        self.started.append((what, process, log))

    def check_alive(self) -> None:
        """``ConfigError`` naming the first process that ended, with its log's last line."""
        for what, process, log in self.started:
            if process.poll() is not None:
                raise ConfigError(f"{what} ended ({process.returncode}) while the job started: {why_it_ended(log)} (log: {log})")

    def end(self, grace_s: float = 30.0) -> None:
        for _, process, _ in reversed(self.started):
            members = _session_members(process.pid) | ({process.pid} if process.poll() is None else set())
            _signal_all(members, signal.SIGTERM)
            deadline = time.monotonic() + grace_s
            while (members := {p for p in members if _alive(p)}) and time.monotonic() < deadline:
                process.poll()  # reaps our own child once it ends
                time.sleep(0.2)
            _signal_all(members, signal.SIGKILL)
            process.poll()


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


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _signal_all(pids: set[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def _lock_store(store: Path, job_id: str) -> int:
    """Hold the MLflow store's folder for this job: two servers on one SQLite file would corrupt it."""
    store.mkdir(parents=True, exist_ok=True)
    note = store / "served_by"
    fd = os.open(store, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        holder = note.read_text().strip() if note.is_file() else "another job"
        raise ConfigError(
            f"the MLflow store {store} is served by {holder}: one job at a time per store (give the next --store DIR)"
        ) from None
    write_atomically(note, f"Slurm job {job_id} on {socket.gethostname()} since {time.strftime('%Y-%m-%d %H:%M:%S %Z')}\n")
    return fd


def _wait_for_port(host: str, port: int, process: subprocess.Popen, what: str, log: Path, seconds: float = 180) -> None:
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


def _wait_for_nodes(address: str, count: int, env: dict[str, str], processes: _Processes, seconds: float = 300) -> dict[str, str]:
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


def slurm_nodes_of(alive: dict[str, str], job_id: str, nodes: list[str]) -> dict[str, str]:
    """``{Ray node id: Slurm node}``: each node's raylet lives under its ``ray_temp_dir``, which names it."""
    found = {}
    for node_id, socket_path in alive.items():
        for node in nodes:
            if f"/{ray_temp_dir(job_id, node).name}/" in socket_path:
                found[node_id] = node
    return found


def driver_command(spec: JobSpec, job_dir: Path, address: str, uri: str) -> list[str]:
    """``mjp sweep resume`` of the job's sweep when one was started before, else ``mjp sweep run``."""
    storage = job_dir / SWEEPS_DIR
    started = sorted(p.parent for p in storage.glob("*/mjp_sweep.json")) if storage.is_dir() else []
    mjp = [sys.executable, "-m", "sweep.cli", "sweep"]
    if started:
        return [*mjp, "resume", str(started[-1]), "--address", address, "--uri", uri]
    command = [*mjp, "run", spec.study, "--storage", str(storage), "--address", address, "--uri", uri]
    command += ["--smoke"] if spec.smoke else []
    command += [f"--set={s}" for s in spec.sets] + ([f"--data={spec.data}"] if spec.data else [])
    return command


def _near_time_limit(job_id: str, lead_s: int) -> bool:
    out = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%L"], capture_output=True, text=True, timeout=60)
    try:
        return time_limit_s(out.stdout.strip()) <= lead_s + 120
    except ConfigError:  # UNLIMITED, INVALID, or the job already gone
        return False


def run_job(job_dir: Path) -> int:
    """Run the job's sweep to its end or to a signal; the driver's exit status."""
    job_dir = job_dir.resolve()
    spec = JobSpec.read(job_dir)
    job_id, nodelist = os.environ.get("SLURM_JOB_ID"), os.environ.get("SLURM_JOB_NODELIST")
    if not job_id or not nodelist:
        raise ConfigError("`mjp cluster slurm-job` runs inside a Slurm job (its batch script): $SLURM_JOB_ID is not set")
    restart = int(os.environ.get("SLURM_RESTART_COUNT") or 0)
    signals, processes = _Signals(), _Processes()
    log_dir = job_dir / "logs" / f"{job_id}-{restart}"
    log_dir.mkdir(parents=True, exist_ok=True)
    nodes = job_nodes(nodelist)
    head_ip = node_address(nodes[0])
    status = 1
    try:
        _lock_store(Path(spec.store_dir), job_id)
        token = write_token(job_dir / "auth_token")
        env = job_environment(token)
        store = Path(spec.store_dir)
        server, mlflow_port = start_mlflow_server(store / "mlflow.db", store / "artifacts", log_dir / "mlflow-server.log", env, log_dir)
        processes.add("the MLflow server", server, log_dir / "mlflow-server.log")
        gate, gate_port = start_gate(head_ip, mlflow_port, token, log_dir / "mlflow-gate.log", env)
        processes.add("the MLflow gate", gate, log_dir / "mlflow-gate.log")
        uri = f"http://{head_ip}:{gate_port}"
        env.update(MLFLOW_TRACKING_URI=uri, MLFLOW_TRACKING_TOKEN=token.read_text().strip())
        env.update(MJP_SWEEP_STORAGE=str(job_dir / SWEEPS_DIR), MJP_REPORTS_DIR=str(job_dir / "reports"))
        shape = spec.shape
        gcs = free_port(head_ip)
        head_cpus = max(1, shape.cpus_per_node - 1)  # one CPU of the first node for the driver, MLflow and the gate
        command = ray_start(head_ip, ray_temp_dir(job_id, nodes[0]), head_cpus, shape.gpus_per_node, head_port=gcs)
        head = processes.start("Ray's head", command, env, log_dir / "ray-head.log")
        _wait_for_port(head_ip, gcs, head, "Ray's head", log_dir / "ray-head.log")
        address = f"{head_ip}:{gcs}"
        for node in nodes[1:]:  # one step per node, from the batch step: no srun inside srun
            join = [sys.executable, "-m", "sweep.cli", "cluster", "slurm-node", str(job_dir), "--head", address]
            srun = ["srun", "--nodes=1", "--ntasks=1", "-w", node, f"--cpus-per-task={shape.cpus_per_node}", *join]
            processes.start(f"node {node}'s Ray", srun, env, log_dir / f"node-{node}.log")
        ray_nodes = slurm_nodes_of(_wait_for_nodes(address, len(nodes), env, processes), job_id, nodes)
        write_atomically(log_dir / RAY_NODES_FILE, json.dumps(ray_nodes, indent=1) + "\n")  # MLflow's mjp.node.rank* -> Slurm's nodes
        joined = len(set(ray_nodes.values()))
        names = ", ".join(nodes)
        say(f"job {job_id} (start {restart + 1}): Ray at {address} with {joined} of {len(nodes)} nodes ({names}); MLflow at {uri}")
        tunnel = f"ssh -N -L 5000:127.0.0.1:{mlflow_port} {nodes[0]}"
        say(f"the MLflow UI while this job runs: `{tunnel}` on the login node, then http://localhost:5000")
        command = driver_command(spec, job_dir, address, uri)
        say("driver: mjp " + " ".join(command[3:]))
        signals.driver = subprocess.Popen(command, env=env, start_new_session=True)
        status = signals.driver.wait()
    except _Stopped:
        status = 128 + (signals.received or signal.SIGTERM)
    except ConfigError as err:
        say(f"error: {err}")
        status = 2
    finally:
        processes.end()
        for node in nodes:
            shutil.rmtree(ray_temp_dir(job_id, node), ignore_errors=True)
        (job_dir / "auth_token").unlink(missing_ok=True)  # the job's token ends with it (a SIGKILL's is replaced at the next start)
    say(f"job {job_id} ends: the sweep's driver exited {status}; every process of the job ended")
    if signals.received == signal.SIGTERM and _near_time_limit(job_id, spec.shape.signal_lead_s):
        _requeue(job_id, restart, spec, job_dir)
    return status


def _requeue(job_id: str, restart: int, spec: JobSpec, job_dir: Path) -> None:
    if restart >= spec.max_restarts:
        say(f"not requeued: started {restart + 1} times (--max-restarts {spec.max_restarts}); `sbatch {job_dir}/job.sbatch` continues")
        return
    out = subprocess.run(["scontrol", "requeue", job_id], capture_output=True, text=True, timeout=60)
    if out.returncode == 0:
        say(f"time limit: job {job_id} requeued; its next start resumes the sweep")
    else:
        say(f"time limit, and `scontrol requeue {job_id}` failed ({out.stderr.strip()}); `sbatch {job_dir}/job.sbatch` continues")
