"""``mjp cluster slurm-node JOB_DIR --head IP:PORT``: one node of a Slurm job joins the job's Ray
head (``srun`` starts it on each node but the first). It checks that this node sees the job's
folder, then runs ``ray start --block`` with this node's address and ports until the job's end
signals the step (``srun`` passes the job's SIGTERM on). Then it ends this node's Ray within
seconds, before Slurm kills the step, and removes Ray's folder on this node's own disk, which no
other node of the job can reach. A Ray that ends by itself keeps its folder, for its logs: the
step's output says where."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from sweep.cluster.processes import session_processes
from sweep.cluster.slurm.job_processes import end_all
from sweep.cluster.slurm.job_spec import JobSpec
from sweep.cluster.slurm.ray_nodes import node_address, ray_start, ray_temp_dir
from trainables.errors import ConfigError
from trainables.launch.signals import interrupted_status


def join(job_dir: Path, head: str) -> int:
    """Run this node's ``ray start`` joining ``head`` until it ends: the exit status of a Ray that
    failed, else 128 + the step's signal. ``ConfigError`` when this node cannot see the job's
    folder or is not in a Slurm step."""
    node = os.environ.get("SLURMD_NODENAME")
    if not node:
        raise ConfigError("`mjp cluster slurm-node` runs inside a Slurm job step (srun), where $SLURMD_NODENAME names the node")
    if not (job_dir / "job.json").is_file():
        raise ConfigError(f"node {node} does not see {job_dir}/job.json: the job's folder must be on a filesystem every node mounts")
    spec = JobSpec.read(job_dir)
    address = node_address(node)
    temp_dir = ray_temp_dir(os.environ.get("SLURM_JOB_ID", "0"), node)
    command = ray_start(address, temp_dir, spec.shape.cpus_per_node, spec.shape.gpus_per_node, head=head)
    print(f"node {node} ({address}) joins Ray at {head}", flush=True)
    ray = subprocess.Popen(command)
    try:
        ended_by_itself = ray.wait() > 0
    except KeyboardInterrupt:  # the step's SIGTERM (or SIGINT): the job ends
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):  # a second one (scancel's, then the job's) cuts nothing short
            signal.signal(sig, signal.SIG_IGN)
        ray.kill()  # not the drain of up to 30 s its own SIGTERM starts, past which Slurm kills the step
        ray.wait()
        ended_by_itself = False
    if ended_by_itself:
        print(f"node {node}: Ray ended by itself ({ray.returncode}); its logs stay in {temp_dir}", flush=True)
        return ray.returncode
    end_all(set(session_processes(temp_dir)), time.monotonic() + 5.0)  # the raylet, its agents and workers
    shutil.rmtree(temp_dir, ignore_errors=True)
    return interrupted_status()
