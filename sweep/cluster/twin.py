"""A local twin of ``cluster.yaml`` on this machine (``mjp cluster up --local`` / ``mjp cluster down``).

Ray 2.60's ``fake_multinode`` autoscaling provider starts worker "nodes" (real raylets with their
own node ids and resources) on this machine when the autoscaler asks for them. The twin keeps
``cluster.yaml``'s roles:

- ``head``: runs the sweep drivers (Ray jobs' entrypoints, which ask for no resources), never
  training or Ray Data tasks: it has no ``mjp_gpu`` and 0 CPUs.
- ``gpu_worker``: stands in for the 8-GPU nodes: ``{CPU: 2, mjp_gpu: 1}``. A trial asks for it with
  ``scaling.worker_resources: {mjp_gpu: 1}`` in place of ``scaling.use_gpu``. The second CPU is
  the real node's spare cores: a multi-worker trial's driver (0.25 CPU) lands beside a worker, as
  the head has no CPU for tasks.
- ``cpu_worker``: CPU-only nodes for Ray Data's read and decode tasks: ``{CPU: 1, mjp_data: 1}``;
  a study keeps its decoding there with ``data.ray_data_resources: {mjp_data: 1}`` (cluster.yaml's
  CPU nodes declare ``mjp_data`` too).

Every worker type has ``min_workers: 0``: the autoscaler starts them on demand. The head listens
on 127.0.0.1 only (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``), with token authentication
(``RAY_AUTH_MODE=token``; ``up`` writes a fresh token into the session directory and names it
with ``RAY_AUTH_TOKEN_PATH``, so the twin needs no ``~/.ray/auth_token`` and never touches one),
and an ``mlflow server`` on 127.0.0.1 is the tracking server behind ``mjp cluster mlflow-gate``
(the session's token), as ``cluster.yaml``'s head starts them: every process of the twin reaches
MLflow through the gate. Everything lives in one session directory; ``down`` ends
exactly the processes whose command lines name it (never ``ray stop``, which would end every Ray
on the machine).
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import yaml

from sweep.cluster.ports import free_port
from sweep.cluster.processes import is_gcs, session_processes
from sweep.cluster.twin_config import twin_config
from sweep.cluster.twin_mlflow import start_mlflow
from sweep.study.names import PROJECT_DIR
from trainables.errors import ConfigError
from trainables.written import write_atomically

#: the file in the session directory that ``up`` writes and ``down`` / the tests read
STATE_FILE = "cluster.json"


#: the session's Ray authentication token (``RAY_AUTH_TOKEN_PATH`` names it)
TOKEN_FILE = "auth_token"


DEFAULT_SESSION = "/tmp/mjp-local-cluster"


@dataclass(frozen=True)
class LocalCluster:
    """What ``up`` started: the Ray address (GCS), the dashboard (jobs API), the tracking URI."""

    session_dir: str
    address: str
    dashboard: str
    tracking_uri: str  # the MLflow gate, as on cluster.yaml's head: every client sends the token
    storage: str
    bucket: str = ""  # the folder standing in for cluster.yaml's S3 bucket (empty in a state written before it)
    mlflow_server: str = ""  # the MLflow server behind the gate, on loopback (cluster.yaml: the UI's SSH tunnel)

    @property
    def kept_store(self) -> Path:
        """Where ``down`` keeps the MLflow store and ``up`` takes it from (``$MJP_BUCKET/mlflow/mlflow.db`` on AWS)."""
        return Path(self.bucket) / "mlflow" / "mlflow.db"

    @property
    def token_path(self) -> str:
        """The session's Ray token: every node, job and client of the twin authenticates with it."""
        return str(Path(self.session_dir) / TOKEN_FILE)

    def environment(self) -> dict[str, str]:
        """The variables a shell needs to use this cluster (``mjp cluster up`` prints them)."""
        return {
            "RAY_ADDRESS": self.address,
            "RAY_API_SERVER_ADDRESS": self.dashboard,
            "MLFLOW_TRACKING_URI": self.tracking_uri,
            "MLFLOW_TRACKING_TOKEN": Path(self.token_path).read_text().strip(),  # what the gate wants (cluster.yaml: each shell)
            "MJP_SWEEP_STORAGE": self.storage,
            "MJP_REPORTS_DIR": str(Path(self.session_dir) / "reports"),
            "RAY_AUTH_MODE": "token",
            "RAY_AUTH_TOKEN_PATH": self.token_path,
            "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
        }


def _environment() -> dict[str, str]:
    from trainables.launch.ray_runtime import prepare_environment

    prepare_environment()  # what every Ray process of the project needs (the head's and its nodes' inherit it)
    env = {**os.environ, "RAY_FAKE_CLUSTER": "1", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_AUTH_MODE": "token"}
    here = str(PROJECT_DIR)
    env["PYTHONPATH"] = os.pathsep.join([here, *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != here]])
    # a job's `bash -c "cd $PWD && mjp ..."` (docs/cluster-local.md) finds this environment's `mjp`
    # and `ray`, as under `uv run`, however `up` was started (`.venv/bin/mjp cluster up`)
    tools = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join([tools, *[p for p in env.get("PATH", "").split(os.pathsep) if p and p != tools]])
    return env


def write_token(path: Path) -> Path:
    """Write a fresh Ray token (Ray's own format: 64 hex digits) to ``path``, readable by this user
    only (0600 from before its first byte, whatever mode an old file had), whole, and never
    through a link at ``path``."""
    write_atomically(path, secrets.token_hex(32), mode=0o600)
    return path


def up(
    session_dir: str | Path = DEFAULT_SESSION, *, gpu_workers: int = 2, cpu_workers: int = 1, bucket: str | Path | None = None
) -> LocalCluster:
    """Start the twin: a ``fake_multinode`` Ray head with its autoscaler, and an MLflow server.

    ``bucket`` (default ``SESSION/bucket``) stands in for cluster.yaml's S3 bucket: the sweeps,
    MLflow's artifacts, and the copy of MLflow's store that ``down`` saves and a new twin's ``up``
    starts from, as a new head on AWS does."""
    session = Path(session_dir).resolve()
    if (session / STATE_FILE).exists():
        raise ConfigError(f"{session} already holds a local cluster ({STATE_FILE}); `mjp cluster down --session {session}` first")
    if not 1 <= gpu_workers <= 4 or not 0 <= cpu_workers <= 4:
        raise ConfigError(f"gpu_workers={gpu_workers}, cpu_workers={cpu_workers}: allowed 1-4 and 0-4 on one machine")
    session.mkdir(parents=True, exist_ok=True)
    env = _environment()
    token = write_token(session / TOKEN_FILE)
    env.pop("RAY_AUTH_TOKEN", None)  # a token in the caller's environment would win over the session's
    env["RAY_AUTH_TOKEN_PATH"] = str(token)
    gcs, dash = free_port(), free_port()
    config = session / "autoscaler.yaml"
    write_atomically(config, yaml.safe_dump(twin_config(gcs, gpu_workers=gpu_workers, cpu_workers=cpu_workers)))
    kept = Path(bucket or session / "bucket").expanduser().resolve()
    (kept / "mjp-sweeps").mkdir(parents=True, exist_ok=True)
    try:
        # MLflow listening before Ray starts: Ray's processes bind ports of their own choosing, and one
        # took the server's port while it was still importing (uvicorn then ends: address already in use)
        mlflow_port, gate_port = start_mlflow(session, env, kept, token)
        return _start_head(session, config, kept, env, gcs, dash, mlflow_port, gate_port)
    except BaseException:  # whatever stops the start (a missing `ray`, Ctrl-C): nothing left running
        down(session)
        raise


def _start_head(
    session: Path, config: Path, bucket: Path, env: dict[str, str], gcs: int, dash: int, mlflow_port: int, gate_port: int
) -> LocalCluster:
    """``ray start --head`` with the autoscaler, in a process group of its own, which ``down``
    ends (Ray's client proxy names no path of the session)."""
    ray_cli = Path(sys.executable).with_name("ray")
    if not ray_cli.exists():
        raise ConfigError(f"no `ray` command beside this Python ({ray_cli}); run from the project's environment (.venv/bin/mjp)")
    ports = {
        "--dashboard-agent-listen-port": free_port(),
        "--dashboard-agent-grpc-port": free_port(),
        "--metrics-export-port": free_port(),
        "--runtime-env-agent-port": free_port(),
        "--ray-client-server-port": free_port(),
    }
    command = [
        str(ray_cli),
        "start",
        "--head",
        "--node-ip-address",
        "127.0.0.1",
        "--port",
        str(gcs),
        "--temp-dir",
        str(session / "ray"),
        "--num-cpus",
        "0",
        "--autoscaling-config",
        str(config),
        "--include-dashboard",
        "true",
        "--dashboard-host",
        "127.0.0.1",
        "--dashboard-port",
        str(dash),
        *[f"{k}={v}" for k, v in ports.items()],
        "--disable-usage-stats",
    ]
    # as cluster.yaml's head: the jobs submitted to it inherit the tracking URI and the sweep storage
    cluster = LocalCluster(
        str(session),
        f"127.0.0.1:{gcs}",
        f"http://127.0.0.1:{dash}",
        f"http://127.0.0.1:{gate_port}",
        str(bucket / "mjp-sweeps"),
        str(bucket),
        f"http://127.0.0.1:{mlflow_port}",
    )
    passed_on = ("MLFLOW_TRACKING_URI", "MLFLOW_TRACKING_TOKEN", "MJP_SWEEP_STORAGE", "MJP_REPORTS_DIR")
    env.update({k: v for k, v in cluster.environment().items() if k in passed_on})
    env.setdefault("RAY_JOB_STOP_WAIT_TIME_S", "120")  # `ray job stop`: SIGTERM, then 120 s (not 3) for the sweep to close its runs
    with open(session / "ray-start.log", "w") as log:
        start = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=session, start_new_session=True)
        write_atomically(session / "ray-head.pgid", str(start.pid))
        returncode = start.wait()
    write_atomically(session / STATE_FILE, json.dumps(asdict(cluster), indent=1))
    if returncode != 0:
        raise ConfigError(f"`ray start --head` failed ({returncode}); see {session / 'ray-start.log'}")
    return cluster


def read_state(session_dir: str | Path) -> LocalCluster:
    path = Path(session_dir).resolve() / STATE_FILE
    if not path.is_file():
        raise ConfigError(f"no local cluster in {path.parent} (no {STATE_FILE}); `mjp cluster up --local --session DIR` makes one")
    return LocalCluster(**json.loads(path.read_text()))


def kept_store_of(session: Path) -> Path | None:
    """Where ``down`` saves the MLflow store of the twin in ``session`` (its bucket's copy), or None
    where there is nothing to save (no twin there, no store yet, a state without a bucket)."""
    if not ((session / STATE_FILE).is_file() and (session / "mlflow" / "mlflow.db").is_file()):
        return None
    state = read_state(session)
    return state.kept_store if state.bucket else None


def down(session_dir: str | Path = DEFAULT_SESSION, *, grace_s: float = 10.0) -> list[int]:
    """Save the twin's MLflow store to its bucket, then end every process of the twin in
    ``session_dir``: SIGTERM to all but the GCS, then to the GCS, then SIGKILL to what is left,
    each after at most ``grace_s``.

    Returns the PIDs ended. The session directory stays (logs, the MLflow store) but loses its
    state file, so ``up`` can use it again.
    """
    from sweep.cluster.store_copy import save_store

    session = Path(session_dir).resolve()
    unsaved = None
    kept = kept_store_of(session)
    if kept is not None:
        try:
            save_store(session / "mlflow" / "mlflow.db", str(kept))
        except ConfigError as err:  # the twin still goes down; the store stays in the session directory
            unsaved = err
    ended: set[int] = set()

    def running(spare_gcs: bool) -> list[int]:
        return [pid for pid in session_processes(session) if not (spare_gcs and is_gcs(pid))]

    # The GCS last, as `ray stop` does: a GCS ended while the raylets and the autoscaler still
    # talk to it leaves them retrying it until the SIGKILL (measured: 12 s, against 1.7 s in this order).
    for sig, wait, spare_gcs in ((signal.SIGTERM, grace_s, True), (signal.SIGTERM, grace_s, False), (signal.SIGKILL, 5.0, False)):
        for pid in running(spare_gcs):
            try:
                os.kill(pid, sig)
                ended.add(pid)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait
        while running(spare_gcs) and time.monotonic() < deadline:
            time.sleep(0.2)
    (session / STATE_FILE).unlink(missing_ok=True)
    if unsaved is not None:
        raise ConfigError(f"the twin is down, but its MLflow store was not saved to its bucket: {unsaved}")
    return sorted(ended)
