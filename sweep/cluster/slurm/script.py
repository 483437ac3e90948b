"""The batch script of a sweep job (``mjp cluster slurm`` writes it into the job's folder and hands
it to ``sbatch``; ``--dry-run`` prints it): Slurm's directives for the shape, then one command.

The script holds no path but the job's folder on the shared filesystem and the project's Python
(the environment ``make setup`` made there), and asks for what the study needs: ``--nodes`` with one
task each, its CPUs and GPUs, ``--signal=B:TERM@lead`` (the batch shell, and so the job's own
process, is told before the time limit) and ``--requeue``. Everything else runs from that one
command, ``mjp cluster slurm-job``: Ray's head on the first node, one ``srun`` step per other node
(never ``srun`` inside ``srun``), the MLflow server and its gate, then the sweep's driver."""

from __future__ import annotations

import shlex
import sys
import time
from pathlib import Path

from sweep.cluster.slurm.shape import SlurmShape


def job_name(study: str, smoke: bool) -> str:
    return f"mjp-{study}" + ("-smoke" if smoke else "")


def batch_script(shape: SlurmShape, job_dir: Path, project_dir: Path, name: str, python: str = sys.executable) -> str:
    """The script's text (bash). ``job_dir``: the job's folder on the shared filesystem (its
    ``job.json``, logs, sweeps); ``project_dir``: the checkout whose environment runs the job."""
    directives = [
        f"--job-name={name}",
        f"--nodes={shape.nodes}",
        "--ntasks-per-node=1",
        f"--cpus-per-task={shape.cpus_per_node}",
        *([f"--gpus-per-node={shape.gpus_per_node}"] if shape.gpus_per_node else []),
        *([f"--mem={shape.mem}"] if shape.mem else []),
        f"--partition={shape.partition}",
        *([f"--account={shape.account}"] if shape.account else []),
        f"--time={shape.time}",
        f"--signal=B:TERM@{shape.signal_lead_s}",
        "--requeue",
        "--open-mode=append",
        f"--output={job_dir}/slurm-%j.out",
    ]
    q = shlex.quote
    return "\n".join(
        [
            "#!/bin/bash",
            f"# MJP sweep job, written by `mjp cluster slurm` on {time.strftime('%Y-%m-%d %H:%M %Z')} (docs/cluster-slurm.md).",
            "# The first node runs Ray's head, the MLflow server (loopback) and its gate (the node's address, token",
            "# only), and the sweep's driver; each other node joins Ray through one `srun` step. Every process ends",
            "# with the job. SIGTERM before the time limit closes the runs (KILLED) and requeues this job, which",
            "# resumes the same sweep; `sbatch` this file again to resume it after a `scancel`.",
            *[f"#SBATCH {d}" for d in directives],
            "",
            "set -euo pipefail",
            f"cd {q(str(project_dir))}",
            f"exec {q(python)} -m sweep.cli cluster slurm-job {q(str(job_dir))}",
            "",
        ]
    )
