"""``mjp cluster slurm STUDY``: a sweep as one Slurm job (submitted, or printed with ``--dry-run``);
``mjp cluster slurm-job`` and ``slurm-node``: what that job runs on its nodes (``sweep/cluster/slurm/``)."""

from __future__ import annotations

import argparse
import os
import shlex
from pathlib import Path

from trainables.errors import ConfigError


def cmd_cluster_slurm(args: argparse.Namespace) -> int:
    from sweep.cluster.slurm.job_spec import SCRIPT_FILE, JobSpec
    from sweep.cluster.slurm.shape import SlurmShape
    from sweep.cluster.slurm.submit import submit
    from sweep.study.cli_overrides import set_overrides
    from sweep.study.load import load_study
    from sweep.study.names import PROJECT_DIR

    shared = args.shared or os.environ.get("MJP_SLURM_DIR")
    if not shared:
        raise ConfigError(
            "no shared folder: give --shared DIR or set $MJP_SLURM_DIR (a folder every node mounts: the job's sweep, logs and MLflow store)"
        )
    if args.max_restarts < 0:
        raise ConfigError(f"--max-restarts {args.max_restarts}: allowed is 0 or more")
    shape = SlurmShape(
        args.nodes, args.gpus_per_node, args.cpus_per_node, args.partition, args.time, args.account, args.mem, args.signal_lead
    )
    study = load_study(args.study, smoke=args.smoke, overrides=set_overrides(args), files=False)  # as `sweep plan`: data on the nodes
    path = Path(args.study)
    study_arg = str(path.resolve()) if path.suffix in (".yaml", ".yml") or path.exists() else args.study
    shared_dir = Path(shared).expanduser().absolute()
    store = str(Path(args.store).expanduser().absolute()) if args.store else str(shared_dir / "mlflow")
    spec = JobSpec(study_arg, args.smoke, shape, store, list(args.set), args.data, args.max_restarts)
    done = submit(study, spec, shared_dir, PROJECT_DIR, dry_run=args.dry_run)
    if done.job_id is None:
        print(done.script, end="")
        return 0
    j, d = done.job_id, shlex.quote(str(done.job_dir))
    gpus = f"{shape.gpus_per_node} GPUs" if shape.gpus_per_node else "no GPU"
    uri = shlex.quote(f"sqlite:///{store}/mlflow.db")
    print(
        "\n".join(
            [
                f"submitted Slurm job {j}: study {study.name}, {shape.nodes} nodes x ({shape.cpus_per_node} CPUs, {gpus}), "
                f"partition {shape.partition}, {shape.time}",
                f"  its folder: {d}",
                f"  follow it:  squeue -j {j}; tail -f {d}/slurm-{j}.out",
                f"  stop it:    scancel {j}   (then `sbatch {d}/{SCRIPT_FILE}` resumes the sweep)",
                f"  its runs:   mjp sweep status {study.name} --uri {uri}   (the UI while it runs: docs/cluster-slurm.md)",
            ]
        )
    )
    return 0


def cmd_cluster_slurm_job(args: argparse.Namespace) -> int:
    from sweep.cluster.slurm.job import run_job

    return run_job(Path(args.job_dir))


def cmd_cluster_slurm_node(args: argparse.Namespace) -> int:
    from sweep.cluster.slurm.node import join

    join(Path(args.job_dir).resolve(), args.head)
    return 0
