"""``mjp cluster slurm STUDY ...``: check the study, the shape and the shared folder, write the job's
folder (``job.json``, ``job.sbatch``) and submit it with ``sbatch`` (or print the script). Every
refusal is one line before anything is submitted, ``sbatch``'s own where it refuses (an account or
a partition it does not accept, a time over the partition's limit), and leaves no folder behind."""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sweep.cluster.slurm.job_spec import SCRIPT_FILE, JobSpec
from sweep.cluster.slurm.script import batch_script, job_name
from sweep.cluster.slurm.shape import SlurmShape, SlurmUnreachable, check_fits, partition_nodes
from sweep.cluster.slurm.shared_fs import check_shared_dir
from trainables.errors import ConfigError
from trainables.written import write_atomically


@dataclass(frozen=True)
class Submitted:
    job_id: str | None  # None: --dry-run
    job_dir: Path
    script: str


def check_study_fits(study: Any, shape: SlurmShape) -> None:
    """The study's trials ask for what the nodes have, and the job asks for nothing they leave unused."""
    s = study.base.scaling
    if s.worker_resources:
        raise ConfigError(
            f"study {study.name}: scaling.worker_resources {s.worker_resources} is a resource no Slurm node offers "
            "(the local twin's stand-in); on Slurm ask for GPUs with scaling.use_gpu"
        )
    if s.use_gpu and shape.gpus_per_node < s.gpus_per_worker:
        raise ConfigError(
            f"study {study.name} trains on GPUs ({s.gpus_per_worker:g} per worker): --gpus-per-node {shape.gpus_per_node} "
            f"gives its workers none; ask for at least {s.gpus_per_worker:g}"
        )
    if not s.use_gpu and shape.gpus_per_node:
        raise ConfigError(
            f"study {study.name} trains on CPUs (scaling.use_gpu is false): --gpus-per-node {shape.gpus_per_node} would hold GPUs "
            "it never uses; give --gpus-per-node 0, or --set scaling.use_gpu=true"
        )
    if s.cpus_per_worker > shape.cpus_per_node:
        raise ConfigError(
            f"study {study.name}: a training worker asks for {s.cpus_per_worker:g} CPUs, more than --cpus-per-node {shape.cpus_per_node}"
        )


def nodes_are_this_machine(partition: str) -> bool:
    """Whether every node of the partition is this machine (its addresses resolve to loopback)."""
    out = subprocess.run(["scontrol", "show", "node", "-o"], capture_output=True, text=True, timeout=60)
    addresses = []
    for line in out.stdout.splitlines():
        fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
        if partition in fields.get("Partitions", "").split(","):
            addresses.append(fields.get("NodeAddr", fields.get("NodeName", "")))
    try:
        return bool(addresses) and all(socket.gethostbyname(a).startswith("127.") for a in addresses)
    except OSError:
        return False


def note(text: str) -> None:
    """What a dry run could not check, on stderr (the script alone goes to stdout)."""
    import sys

    print(text, file=sys.stderr)


def _one_line(text: str) -> str:
    return " ".join(line.strip() for line in text.strip().splitlines() if line.strip()) or "no message"


def submit(study: Any, spec: JobSpec, shared: Path, project_dir: Path, *, dry_run: bool) -> Submitted:
    """Check, write and submit the job (``dry_run``: check and return the script, writing nothing)."""
    shape = spec.shape
    check_study_fits(study, shape)
    slurm = shutil.which("sbatch") is not None
    if not dry_run and not slurm:
        raise ConfigError("no `sbatch` on PATH: run `mjp cluster slurm` on a Slurm login node (--dry-run prints the script)")
    if slurm:
        try:
            check_fits(shape, partition_nodes(shape.partition, seconds=15 if dry_run else 120))  # a dry run only advises
        except SlurmUnreachable as err:
            if not dry_run:
                raise
            note(f"note: not checked against the partition ({err})")
            slurm = False
    elif dry_run:
        note("note: no Slurm here (no `sbatch`): not checked against the partition")
    shared = shared.expanduser().absolute()
    if dry_run and not shared.is_dir():
        note(f"note: --shared {shared} is not here: not checked (on the login node it must be a folder every node mounts)")
    else:
        check_shared_dir(shared, slurm and nodes_are_this_machine(shape.partition))
    if re.search(r"[\s%\\\"']", str(shared)):
        raise ConfigError(f"--shared {shared}: a path with spaces, quotes or % cannot be named in an #SBATCH line")
    name = job_name(study.config.name, study.smoke)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    job_dir = shared / f"{name}-{stamp}"
    if dry_run:
        return Submitted(None, job_dir, batch_script(shape, job_dir, project_dir, name))
    for n in range(2, 1000):
        try:
            job_dir.mkdir()
            break
        except FileExistsError:
            job_dir = shared / f"{name}-{stamp}-{n}"
    script = batch_script(shape, job_dir, project_dir, name)
    try:
        spec.write(job_dir)
        write_atomically(job_dir / SCRIPT_FILE, script)
        test = subprocess.run(["sbatch", "--test-only", str(job_dir / SCRIPT_FILE)], capture_output=True, text=True, timeout=120)
        if test.returncode != 0:
            raise ConfigError(f"sbatch refused the job: {_one_line(test.stderr or test.stdout)}")
        out = subprocess.run(["sbatch", "--parsable", str(job_dir / SCRIPT_FILE)], capture_output=True, text=True, timeout=120)
        if out.returncode != 0:
            raise ConfigError(f"sbatch refused the job: {_one_line(out.stderr or out.stdout)}")
    except BaseException:
        shutil.rmtree(job_dir, ignore_errors=True)
        raise
    return Submitted(out.stdout.strip().split(";")[0], job_dir, script)
