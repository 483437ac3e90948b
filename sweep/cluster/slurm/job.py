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
from sweep.cluster.slurm.job_processes import JobProcesses, wait_for_nodes, wait_for_port
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


#: seconds the driver has to end after a signal that also ended the job's servers
SERVERS_GONE_GRACE_S = 5.0


def _driver_status(signals: _Signals, processes: JobProcesses) -> int:
    """The driver's exit status, once it has ended.

    ``scancel`` and a preemption signal every process of the job at once: Ray's head and the MLflow
    server end with the driver's signal, and the driver, left to close its runs and stop its trials
    through them, would wait on them until Slurm's ``KillWait`` (30 s by default) SIGKILLs the job
    before its clean-up: the token file and Ray's folders left behind. So once a signal came and
    one of the job's servers has ended, the driver gets ``SERVERS_GONE_GRACE_S``, then is stopped.
    The time limit's signal goes to the job's own process only: the servers live on, and the
    driver closes its runs through them, however long that takes."""
    driver = signals.driver
    assert driver is not None
    cut_at: float | None = None
    while True:
        with contextlib.suppress(subprocess.TimeoutExpired):
            return driver.wait(timeout=0.5)
        if cut_at is None and signals.received is not None and (gone := processes.ended()):
            cut_at = time.monotonic() + SERVERS_GONE_GRACE_S
            say(f"{gone[0]} ended with the signal: the driver has {SERVERS_GONE_GRACE_S:g} s to end, then it is stopped")
        elif cut_at is not None and time.monotonic() > cut_at:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(driver.pid, signal.SIGKILL)  # its own session: the driver and what it started
            driver.wait()
            say("the driver was stopped; its runs stay RUNNING until the next start of the job closes them")
            return 128 + (signals.received or signal.SIGTERM)


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
    signals, processes = _Signals(), JobProcesses()
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
        wait_for_port(head_ip, gcs, head, "Ray's head", log_dir / "ray-head.log")
        address = f"{head_ip}:{gcs}"
        for node in nodes[1:]:  # one step per node, from the batch step: no srun inside srun
            join = [sys.executable, "-m", "sweep.cli", "cluster", "slurm-node", str(job_dir), "--head", address]
            srun = ["srun", "--nodes=1", "--ntasks=1", "-w", node, f"--cpus-per-task={shape.cpus_per_node}", *join]
            processes.start(f"node {node}'s Ray", srun, env, log_dir / f"node-{node}.log", step=True)
        ray_nodes = slurm_nodes_of(wait_for_nodes(address, len(nodes), env, processes), job_id, nodes)
        write_atomically(log_dir / RAY_NODES_FILE, json.dumps(ray_nodes, indent=1) + "\n")  # MLflow's mjp.node.rank* -> Slurm's nodes
        joined = len(set(ray_nodes.values()))
        names = ", ".join(nodes)
        say(f"job {job_id} (start {restart + 1}): Ray at {address} with {joined} of {len(nodes)} nodes ({names}); MLflow at {uri}")
        tunnel = f"ssh -N -L 5000:127.0.0.1:{mlflow_port} {nodes[0]}"
        say(f"the MLflow UI while this job runs: `{tunnel}` on the login node, then http://localhost:5000")
        command = driver_command(spec, job_dir, address, uri)
        say("driver: mjp " + " ".join(command[3:]))
        signals.driver = subprocess.Popen(command, env=env, start_new_session=True)
        status = _driver_status(signals, processes)
    except _Stopped:
        status = 128 + (signals.received or signal.SIGTERM)
    except ConfigError as err:
        say(f"error: {err}")
        status = 2
    finally:
        # after scancel (or a preemption) Slurm SIGTERMs every process of the job, Ray's head drains for
        # 30 s on it, and SIGKILL comes KillWait seconds later: the clean-up hurries, even when the driver
        # ended before any server did (then nothing has ended yet). The time limit's signal (--signal=B:)
        # reaches this process only: the servers live on and end at leisure.
        time_limit = signals.received == signal.SIGTERM and _near_time_limit(job_id, spec.shape.signal_lead_s)
        hurried = signals.received is not None and (bool(processes.ended()) or not time_limit)
        processes.end(grace_s=SERVERS_GONE_GRACE_S if hurried else 30.0)
        shutil.rmtree(ray_temp_dir(job_id, nodes[0]), ignore_errors=True)  # each other node removes its own (node.py)
        (job_dir / "auth_token").unlink(missing_ok=True)  # the job's token ends with it (a SIGKILL's is replaced at the next start)
    say(f"job {job_id} ends: the sweep's driver exited {status}; every process of the job ended")
    if time_limit:
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
