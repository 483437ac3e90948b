"""``mjp cluster slurm-node JOB_DIR --head IP:PORT``: one node of a Slurm job joins the job's Ray
head (``srun`` starts it on each node but the first). It checks that this node sees the job's
folder, then becomes ``ray start --block`` with this node's address and ports, and ends with it
(``srun`` passes the job's SIGTERM on)."""

from __future__ import annotations

import os
from pathlib import Path

from sweep.cluster.slurm.job_spec import JobSpec
from sweep.cluster.slurm.ray_nodes import node_address, ray_start, ray_temp_dir
from trainables.errors import ConfigError


def join(job_dir: Path, head: str) -> None:
    """Replace this process with ``ray start`` joining ``head``; ``ConfigError`` when this node
    cannot see the job's folder or is not in a Slurm step."""
    node = os.environ.get("SLURMD_NODENAME")
    if not node:
        raise ConfigError("`mjp cluster slurm-node` runs inside a Slurm job step (srun), where $SLURMD_NODENAME names the node")
    if not (job_dir / "job.json").is_file():
        raise ConfigError(f"node {node} does not see {job_dir}/job.json: the job's folder must be on a filesystem every node mounts")
    spec = JobSpec.read(job_dir)
    address = node_address(node)
    command = ray_start(
        address, ray_temp_dir(os.environ.get("SLURM_JOB_ID", "0"), node), spec.shape.cpus_per_node, spec.shape.gpus_per_node, head=head
    )
    print(f"node {node} ({address}) joins Ray at {head}", flush=True)
    os.execv(command[0], command)
