"""Ray's processes of a Slurm job: the nodes' addresses as Slurm knows them, the ``ray start``
command of the head and of each other node, and the environment every process of the job shares.

Each node's Ray is addressed by the node's own address (``NodeAddr`` in ``scontrol show node``,
resolved) and takes ports free on that node when it starts: two jobs sharing a node, or two nodes on
one test host, do not collide. Ray's dashboard listens on the head's loopback; the GCS, the raylets
and the dashboard agent bind all interfaces (Ray 2.60 holds only a single-node Ray to one address),
and every Ray connection needs the job's token (``RAY_AUTH_MODE=token``)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from sweep.cluster.ports import free_port
from trainables.errors import ConfigError


def job_nodes(nodelist: str) -> list[str]:
    """The job's node names, in Slurm's order (``scontrol show hostnames``)."""
    out = subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True, timeout=60)
    if out.returncode != 0 or not out.stdout.split():
        raise ConfigError(f"`scontrol show hostnames {nodelist}` failed: {out.stderr.strip() or 'no nodes'}")
    return out.stdout.split()


def node_address(node: str) -> str:
    """The IP address of ``node``: its ``NodeAddr`` in Slurm (a name or an address), resolved."""
    out = subprocess.run(["scontrol", "show", "node", "-o", node], capture_output=True, text=True, timeout=60)
    fields = dict(f.split("=", 1) for f in out.stdout.split() if "=" in f)
    addr = fields.get("NodeAddr") or node
    try:
        return socket.gethostbyname(addr)
    except OSError as err:
        raise ConfigError(f"node {node}: its address {addr!r} does not resolve ({err})") from None


def job_environment(token: Path) -> dict[str, str]:
    """What every process of the job runs with: the project's defaults (``prepare_environment``),
    Ray's token authentication with the job's token file, no usage reports, and Ray's multi-node
    switch at its default. The job inherits the submitting shell's environment (``sbatch``'s
    ``--export=ALL``); one that holds the local twin's variables (``mjp cluster up --local``
    prints them) has ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, with which every node but the head
    refuses ``ray start --address``."""
    from sweep.study.names import PROJECT_DIR
    from trainables.launch.ray_runtime import prepare_environment

    prepare_environment()
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token), "RAY_USAGE_STATS_ENABLED": "0"}
    env.pop("RAY_AUTH_TOKEN", None)  # a token in the caller's environment would win over the job's
    env.pop("RAY_ADDRESS", None)  # every command is given the job's head
    env.pop("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", None)  # a job of several nodes is a Ray cluster
    here = str(PROJECT_DIR)
    env["PYTHONPATH"] = os.pathsep.join([here, *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != here]])
    return env


def ray_start(address: str, temp_dir: Path, cpus: int, gpus: int, head_port: int | None = None, head: str | None = None) -> list[str]:
    """``ray start ... --block`` for a node at ``address``: the head when ``head_port`` is given (its
    GCS there, the dashboard on loopback), else a node joining ``head`` (``IP:PORT``)."""
    ray_cli = Path(sys.executable).with_name("ray")
    if not ray_cli.exists():
        raise ConfigError(f"no `ray` command beside this Python ({ray_cli}); the job runs the project's environment (make setup)")
    command = [str(ray_cli), "start", "--node-ip-address", address, "--num-cpus", str(cpus), "--num-gpus", str(gpus)]
    command += ["--temp-dir", str(temp_dir), "--disable-usage-stats", "--block"]
    ports = ["--dashboard-agent-listen-port", "--dashboard-agent-grpc-port", "--metrics-export-port", "--runtime-env-agent-port"]
    command += [f"{flag}={free_port(address)}" for flag in ports]
    if head_port is not None:
        command += ["--head", "--port", str(head_port), "--include-dashboard", "true", "--dashboard-host", "127.0.0.1"]
        command += ["--dashboard-port", str(free_port("127.0.0.1")), f"--ray-client-server-port={free_port(address)}"]
    else:
        command += ["--address", str(head)]
    return command


def ray_temp_dir(job_id: str, node: str) -> Path:
    """Ray's session folder on the node's own disk (short: Ray's socket paths live under it)."""
    return Path(os.environ.get("TMPDIR") or "/tmp") / f"mjp-ray-{job_id}-{node}"
