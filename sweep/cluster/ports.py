"""The ports the platform chooses for the servers it starts: the twin's and a Slurm job's Ray (GCS,
dashboard, agents, client server), MLflow's server and its gate.

A port is chosen, checked free, and handed to a server that binds it a second or two later, once
it has imported. A port from the kernel's ephemeral range (``bind`` to port 0) may be handed out
again meanwhile: the kernel gives those to every outgoing connection and every ``bind`` to port 0,
Ray's own included. That happened here: a Ray process took the MLflow server's port while the
server was still importing. And Ray ends a node whose dashboard agent cannot bind its port (Ray PR
51705): ``ray start --block`` exits 1. So ports are drawn from a band that the kernel never hands
out and Ray gives none of its workers (``band``). Nor is a port handed out twice by one process:
the twin chooses its GCS port, then starts its MLflow server and gate, then Ray, and the gate was
once given the GCS port, still free then (``ray start`` failed). Only another process that chose
the same port the same way, in the same moment, could still take it.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

from trainables.errors import ConfigError

#: ports Ray gives its workers by default (``--min-worker-port`` 10002 .. ``--max-worker-port`` 19999)
RAY_WORKER_PORTS = range(10002, 20000)
#: where Linux keeps its ephemeral range ("32768 60999" by default)
EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
#: every port ``free_port`` has returned in this process, bound by now or not
_HANDED_OUT: set[int] = set()


def ephemeral_ports(source: Path = EPHEMERAL_RANGE_FILE) -> range:
    """The ports the kernel hands out to outgoing connections and to ``bind`` to port 0."""
    try:
        low, high = (int(v) for v in source.read_text().split())
    except (OSError, ValueError):
        return range(32768, 61000)  # Linux's default, where the file cannot be read
    return range(low, high + 1)


def band(ephemeral: range) -> range:
    """The ports to choose from: above Ray's workers' and below the ephemeral range, or above it
    where it starts lower than that (a tuned kernel)."""
    below = range(RAY_WORKER_PORTS.stop, ephemeral.start)
    above = range(max(ephemeral.stop, RAY_WORKER_PORTS.stop), 65536)
    return below if len(below) >= len(above) else above


def free_port(host: str = "127.0.0.1", ports: range | None = None, tries: int = 200) -> int:
    """A TCP port free on ``host`` now and not returned before in this process, drawn from
    ``ports`` (default: ``band`` of this kernel's ephemeral range), where no other process is
    handed one by the kernel."""
    ports = ports or band(ephemeral_ports())
    draw = random.SystemRandom()
    for _ in range(tries):
        port = draw.choice(ports)
        if port in _HANDED_OUT:  # chosen for a server that may not have bound it yet
            continue
        with socket.socket() as s:
            try:
                s.bind((host, port))
            except OSError:  # in use, or held in TIME_WAIT
                continue
        _HANDED_OUT.add(port)
        return port
    raise ConfigError(f"no free TCP port on {host} among {tries} tried in {ports.start}-{ports.stop - 1}")
