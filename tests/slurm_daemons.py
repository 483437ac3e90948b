"""A real Slurm on this machine for the ``slurm`` tests: ``slurmctld`` and two ``slurmd`` (nodes n1
and n2, 2 CPUs each, both this host on 127.0.0.1) from Debian's ``slurm-wlm``, configured, started
and stopped in a temporary folder (../shared/DESIGN.md, "Slurm"). Nothing of Slurm is mocked.

Two partitions: ``debug`` (both nodes, no time limit) and ``short`` (the same nodes, 5 minutes at
most, enforced at submission: ``sbatch`` itself refuses a longer job).

Each node has a ``/tmp`` of its own, as on a real cluster, where no node can reach another's disk:
a task prolog gives every task on node N the ``TMPDIR`` ``node_tmp[N]``."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from sweep.cluster.ports import free_port

NODES = ("n1", "n2")


def slurm_missing() -> str | None:
    """Why the Slurm tests cannot run here, or None (.ci/run installs slurm-wlm where it can)."""
    missing = [c for c in ("slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "sinfo", "srun") if shutil.which(c) is None]
    if missing:
        return f"Slurm is not installed ({', '.join(missing)} missing): `apt-get install slurm-wlm`"
    if os.geteuid() != 0:
        return "the test cluster's daemons run as root (SlurmUser=root, as in ../shared/DESIGN.md), and this user is not"
    return None


def _free_ports(n: int) -> list[int]:
    """``n`` different ports, free now, chosen as the platform chooses its servers' (sweep/cluster/ports.py)."""
    ports: list[int] = []
    while len(ports) < n:
        if (port := free_port()) not in ports:
            ports.append(port)
    return ports


class SlurmDaemons:
    """The daemons of one test cluster in ``root``; ``env`` is what a client command needs (``SLURM_CONF``)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.conf = root / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        # short, beside /tmp: Ray's socket paths (107 bytes at most) live under a folder in it
        self.node_tmp = {node: Path(tempfile.mkdtemp(prefix=f"mjp-{node}-")) for node in NODES}

    def configure(self) -> None:
        ctld, n1, n2 = _free_ports(3)
        for d in ("state", "spool", "log"):
            (self.root / d).mkdir(parents=True, exist_ok=True)
        r = self.root
        prolog = r / "task_prolog.sh"
        cases = "".join(f'    {node}) echo "export TMPDIR={path}" ;;\n' for node, path in self.node_tmp.items())
        prolog.write_text(f'#!/bin/sh\ncase "$SLURMD_NODENAME" in\n{cases}esac\n')
        prolog.chmod(0o755)
        lines = [
            "ClusterName=mjptest",
            "SlurmctldHost=localhost(127.0.0.1)",
            f"SlurmctldPort={ctld}",
            "AuthType=auth/none",
            "CredType=cred/none",
            "AuthInfo=cred_expire=10",  # a requeued job waits out its old credential: 10 s here, not the default 120 s
            "ProctrackType=proctrack/linuxproc",
            f"TaskProlog={prolog}",
            "TaskPlugin=task/none",
            "SwitchType=switch/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "SlurmUser=root",
            "SlurmdUser=root",
            f"StateSaveLocation={r}/state",
            f"SlurmdSpoolDir={r}/spool/%n",
            f"SlurmctldPidFile={r}/slurmctld.pid",
            f"SlurmdPidFile={r}/slurmd-%n.pid",
            f"SlurmctldLogFile={r}/log/slurmctld.log",
            f"SlurmdLogFile={r}/log/slurmd-%n.log",
            "SlurmdParameters=config_overrides",  # 2 CPUs a node on a 2-core host: both nodes are this machine
            "ReturnToService=2",
            "MpiDefault=none",
            "JobCompType=jobcomp/none",
            "AccountingStorageType=accounting_storage/none",
            "EnforcePartLimits=ALL",
            "KillWait=30",
            "InactiveLimit=0",
            "MinJobAge=600",
            f"NodeName=n1 NodeHostname=localhost NodeAddr=127.0.0.1 Port={n1} CPUs=2 RealMemory=8000 State=UNKNOWN",
            f"NodeName=n2 NodeHostname=localhost NodeAddr=127.0.0.1 Port={n2} CPUs=2 RealMemory=8000 State=UNKNOWN",
            "PartitionName=debug Nodes=n1,n2 Default=YES MaxTime=INFINITE State=UP",
            "PartitionName=short Nodes=n1,n2 MaxTime=5 State=UP",
        ]
        self.conf.write_text("\n".join(lines) + "\n")

    def run(self, *command: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(command, env=self.env, capture_output=True, text=True, check=check, timeout=120)

    def start(self, seconds: float = 120) -> None:
        self.configure()
        self.run("slurmctld", "-f", str(self.conf))
        for node in NODES:
            self.run("slurmd", "-f", str(self.conf), "-N", node)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:  # the nodes register with the controller: an event Slurm reports
            states = self.run("sinfo", "-h", "-N", "-p", "debug", "-o", "%N %t", check=False).stdout.split()
            if states.count("idle") == len(NODES):
                return
            time.sleep(0.5)
        raise RuntimeError(f"the test Slurm's nodes did not come up: sinfo says {states}; logs in {self.root / 'log'}")

    def jobs(self) -> list[str]:
        return self.run("squeue", "-h", "-o", "%i", check=False).stdout.split()

    def job_field(self, job: str, name: str) -> str:
        out = self.run("scontrol", "show", "job", "-o", job, check=False).stdout
        fields = dict(f.split("=", 1) for f in out.split() if "=" in f)
        return fields.get(name, "")

    def stop(self) -> None:
        for job in self.jobs():
            self.run("scancel", job, check=False)
        deadline = time.monotonic() + 90
        while self.jobs() and time.monotonic() < deadline:
            time.sleep(0.5)
        pids = []
        for name in ["slurmctld.pid", *[f"slurmd-{n}.pid" for n in NODES]]:
            try:
                pids.append(int((self.root / name).read_text()))
            except (OSError, ValueError):
                continue
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        while any(Path(f"/proc/{p}").exists() for p in pids) and time.monotonic() < deadline:
            time.sleep(0.2)
        for path in self.node_tmp.values():
            shutil.rmtree(path, ignore_errors=True)
