"""``mjp sweep``: run, plan, resume, list and inspect sweeps."""

from __future__ import annotations

import argparse

from sweep.cli.options import add_address, add_sets, add_store, add_uri, add_verbose, group

STUDY_HELP = "a study YAML file or a shipped study name (`mjp sweep list`)"


def add(sub: argparse._SubParsersAction) -> None:
    sweep = group(sub, "sweep", "run, resume, list and inspect sweeps")
    run = sweep.add_parser("run", help="run a study (a YAML file or a shipped name; `mjp sweep list` shows them)")
    run.add_argument("study", help=STUDY_HELP)
    run.add_argument("--smoke", action="store_true", help="the study's small version, for one machine")
    add_sets(run)
    run.add_argument("--data", help="dataset root (same as --set data.root=PATH)")
    run.add_argument("--storage", help="Tune storage: a directory or s3:// / gs:// URI (default ./ray_results, or $MJP_SWEEP_STORAGE)")
    add_address(run)
    run.add_argument(
        "--max-trials",
        type=int,
        default=None,
        metavar="N",
        help="run a study of up to N trials (default 1000: more is refused; `mjp sweep plan` prices it)",
    )
    add_store(run)
    add_verbose(run)
    run.set_defaults(handler="sweep.commands.sweeps:cmd_sweep_run")

    plan = sweep.add_parser("plan", help="what a study will cost: trials, epochs, resources, concurrency, wall time and GPU-hours")
    plan.add_argument("study", help=STUDY_HELP)
    plan.add_argument("--smoke", action="store_true", help="plan the study's small version")
    add_sets(plan)
    plan.add_argument("--cluster", help="a `ray up` cluster file (e.g. cluster.yaml): plan for it at its largest (default: this machine)")
    plan.add_argument(
        "--img-per-s",
        type=float,
        help="training throughput of one trial, images per second (default: measured here for CPU trials, BENCHMARKS.md for GPU ones)",
    )
    plan.add_argument("--slurm", action="store_true", help="plan for a Slurm job of --nodes x (--gpus-per-node, --cpus-per-node)")
    plan.add_argument("--nodes", type=int, help="with --slurm: the job's nodes")
    plan.add_argument("--gpus-per-node", type=int, help="with --slurm: GPUs on each node")
    plan.add_argument("--cpus-per-node", type=int, help="with --slurm: CPUs on each node")
    plan.add_argument("--time", help="with --slurm: the job's time limit (Slurm's form): how many starts the sweep takes")
    plan.set_defaults(handler="sweep.commands.plan:cmd_sweep_plan")

    resume = sweep.add_parser("resume", help="continue an interrupted sweep from its experiment directory")
    resume.add_argument(
        "experiment_dir", help="the sweep's directory that `mjp sweep run` printed (under ray_results/, or an s3:// / gs:// URI)"
    )
    add_address(resume)
    resume.add_argument(
        "--uri",
        help=(
            "the sweep's MLflow store at a new address (its server moved: a new head or twin); "
            "checked to hold the sweep's parent run (default: the URI the sweep recorded)"
        ),
    )
    add_verbose(resume)
    resume.set_defaults(handler="sweep.commands.sweeps:cmd_sweep_resume")

    status = sweep.add_parser("status", help="sweeps recorded in MLflow and each trial: state, metrics, MLflow run id")
    status.add_argument(
        "target",
        nargs="?",
        metavar="STUDY_OR_SWEEP_DIR",
        help="a study name (its sweeps), a sweep's name as `mjp sweep run` printed it, or its directory under ray_results/ "
        "(that sweep); default: every sweep",
    )
    status.add_argument("--study", help="same as a study name for STUDY_OR_SWEEP_DIR")
    add_uri(status)
    status.add_argument("--limit", type=int, default=10, help="show at most this many sweeps, newest first (default 10)")
    status.set_defaults(handler="sweep.commands.status:cmd_sweep_status")

    listing = sweep.add_parser("list", help="the shipped studies: description, trials, epochs, smoke size")
    listing.set_defaults(handler="sweep.commands.listing:cmd_sweep_list")
