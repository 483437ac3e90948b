"""The local twin's MLflow, as ``cluster.yaml``'s head runs it: an ``mlflow server`` on loopback,
its SQLite store in the session (restored from the bucket's copy, as a new head's is), and
``mjp cluster mlflow-gate`` in front of it, which every node, job and client of the twin goes
through with the session's token."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from sweep.cluster.ports import free_port
from sweep.study.names import PROJECT_DIR
from trainables.errors import ConfigError
from trainables.written import write_atomically


def wait_http(url: str, what: str, seconds: float, log: Path, process: subprocess.Popen) -> None:
    """Until ``url`` answers; ``ConfigError`` with the log's last line when ``process`` ends first or time runs out."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and process.poll() is None:
        try:
            urllib.request.urlopen(url, timeout=2).close()
            return
        except urllib.error.HTTPError:  # an answer (the gate's 401 without its token)
            return
        except OSError:
            time.sleep(0.5)
    tail = log.read_text(errors="replace").strip().splitlines()[-1:] if log.exists() else []
    how = f"ended ({process.returncode})" if process.poll() is not None else f"did not answer within {seconds:.0f} s"
    raise ConfigError(f"{what} at {url} {how} ({tail[0] if tail else 'no log'}); see {log}")


def start_mlflow(session: Path, env: dict[str, str], kept: Path, token: Path) -> tuple[int, int]:
    """The MLflow server (its store ``session/mlflow/mlflow.db``, its artifacts in the bucket
    ``kept``), then the gate in front of it, each answering before this returns; their ports."""
    from sweep.cluster.store_copy import restore_store

    (session / "mlflow").mkdir(exist_ok=True)
    restore_store(str(kept / "mlflow" / "mlflow.db"), session / "mlflow" / "mlflow.db")
    server, mlflow_port = start_mlflow_server(
        session / "mlflow" / "mlflow.db", kept / "mlflow-artifacts", session / "mlflow" / "server.log", env, session
    )
    write_atomically(session / "mlflow" / "server.pgid", str(server.pid))
    # as cluster.yaml's head runs it: the twin's clients reach MLflow through it, with the session's token;
    # its command line names the session's token, so `down` ends it
    gate, gate_port = start_gate("127.0.0.1", mlflow_port, token, session / "mlflow" / "gate.log", env)
    write_atomically(session / "mlflow" / "gate.pgid", str(gate.pid))
    return mlflow_port, gate_port


def start_mlflow_server(db: Path, artifacts: Path, log_path: Path, env: dict[str, str], cwd: Path) -> tuple[subprocess.Popen, int]:
    """An ``mlflow server`` on loopback with its SQLite store ``db`` and its artifacts under
    ``artifacts``, in a process group of its own (ending it ends its uvicorn workers), answering
    before this returns; the process and its port. Its output goes to ``log_path``. A new store is
    made whole first (``create_store_whole``)."""
    if not db.exists():  # the server would make it in place, cut short if the job or twin was killed meanwhile
        from trainables.tracking.store import create_store_whole

        create_store_whole(db, served=True)
    port = free_port()
    command = [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1"]
    command += ["--backend-store-uri", f"sqlite:///{db}", "--artifacts-destination", str(artifacts)]
    with open(log_path, "w") as log:
        server = subprocess.Popen(
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**env, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"},
            start_new_session=True,
            cwd=cwd,
        )
    wait_http(f"http://127.0.0.1:{port}/health", "the MLflow server", 120, log_path, server)
    return server, port


def start_gate(host: str, mlflow_port: int, token: Path, log_path: Path, env: dict[str, str]) -> tuple[subprocess.Popen, int]:
    """``mjp cluster mlflow-gate`` on ``host`` in front of the MLflow server at ``mlflow_port`` on
    loopback, letting in requests that carry ``token``; answering before this returns (its 401 is
    an answer); the process and its port."""
    port = free_port()
    command = [sys.executable, "-m", "sweep.cli", "cluster", "mlflow-gate", "--listen", f"{host}:{port}"]
    command += ["--upstream", f"http://127.0.0.1:{mlflow_port}", "--token-file", str(token)]
    with open(log_path, "w") as log:
        gate = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True, cwd=PROJECT_DIR)
    wait_http(f"http://{host}:{port}/health", "the MLflow gate", 60, log_path, gate)
    return gate, port
