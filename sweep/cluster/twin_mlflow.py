"""The local twin's MLflow, as ``cluster.yaml``'s head runs it: an ``mlflow server`` on loopback,
its SQLite store in the session (restored from the bucket's copy, as a new head's is), and
``mjp cluster mlflow-gate`` in front of it, which every node, job and client of the twin goes
through with the session's token."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from sweep.study.names import PROJECT_DIR
from trainables.errors import ConfigError


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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

    mlflow_port = free_port()
    (session / "mlflow").mkdir(exist_ok=True)
    restore_store(str(kept / "mlflow" / "mlflow.db"), session / "mlflow" / "mlflow.db")
    mlflow_log = session / "mlflow" / "server.log"
    with open(mlflow_log, "w") as log:  # its own process group: `down` ends its uvicorn workers with it
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "mlflow",
                "server",
                "--host",
                "127.0.0.1",
                "--port",
                str(mlflow_port),
                "--workers",
                "1",
                "--backend-store-uri",
                f"sqlite:///{session}/mlflow/mlflow.db",
                "--artifacts-destination",
                str(kept / "mlflow-artifacts"),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**env, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"},
            start_new_session=True,
            cwd=session,
        )
    (session / "mlflow" / "server.pgid").write_text(str(server.pid))
    wait_http(f"http://127.0.0.1:{mlflow_port}/health", "the MLflow server", 120, mlflow_log, server)
    return mlflow_port, _start_gate(session, env, mlflow_port, token)


def _start_gate(session: Path, env: dict[str, str], mlflow_port: int, token: Path) -> int:
    """``mjp cluster mlflow-gate`` in front of the MLflow server, as cluster.yaml's head runs it:
    the twin's clients reach MLflow through it, with the session's token; its port."""
    port = free_port()
    log_path = session / "mlflow" / "gate.log"
    command = [sys.executable, "-m", "sweep.cli", "cluster", "mlflow-gate", "--listen", f"127.0.0.1:{port}"]
    command += ["--upstream", f"http://127.0.0.1:{mlflow_port}", "--token-file", str(token)]
    with open(log_path, "w") as log:  # its command line names the session's token: `down` ends it
        gate = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True, cwd=PROJECT_DIR)
    (session / "mlflow" / "gate.pgid").write_text(str(gate.pid))
    wait_http(f"http://127.0.0.1:{port}/health", "the MLflow gate", 60, log_path, gate)  # its 401 is an answer
    return port
