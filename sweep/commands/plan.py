"""``mjp sweep plan STUDY``: what a study costs before it runs (trials, epochs, images, GPU-hours and
wall time on this machine or on cluster.yaml's nodes), and the sizes it refuses."""

from __future__ import annotations

import argparse
from typing import Any

from sweep.cluster.plan import Machines, Plan, cluster_machines, counted, duration_text, local_machines, make_plan, slurm_machines
from trainables.errors import ConfigError


def describe(study: Any, plan: Plan, machines: Machines) -> str:
    room = plan.capacity
    if not plan.concurrent:
        fits = "none: one trial asks for more than the machines have"
    elif room > plan.concurrent and study.max_concurrent < min(room, plan.trials):
        fits = (
            f"{plan.concurrent} at a time: budget.max_concurrent={study.max_concurrent} caps it, "
            f"the machines hold {room} (raise it in the study's budget:)"
        )
    else:
        fits = f"{plan.concurrent} at a time (budget.max_concurrent={study.max_concurrent}, room for {room})"
    return "\n".join(
        [
            f"study {study.name}: {plan.trials} trials x {plan.epochs} epochs x {plan.train_images:,} training images ({plan.images_note})",
            f"each trial asks for {counted(plan.cpus_per_trial, 'CPU')} and {counted(plan.gpus_per_trial, 'GPU')}",
            f"on {machines.name}: {fits}",
            f"throughput {plan.img_per_s:,.0f} img/s per trial: {plan.img_per_s_source}",
            f"estimate: {duration_text(plan.trial_hours)} per trial, {duration_text(plan.wall_hours)} wall, {plan.gpu_hours:,.1f} GPU-hours"
            f" (training only: start-up and evaluation not counted"
            f"{'; ASHA stops some trials early, so less' if study.config.scheduler.type == 'asha' else ''})",
        ]
    )


def _machines(args: argparse.Namespace) -> Machines:
    shape = [args.nodes, args.gpus_per_node, args.cpus_per_node]
    if not args.slurm:
        if any(v is not None for v in shape) or args.time:
            raise ConfigError("--nodes, --gpus-per-node, --cpus-per-node and --time describe a Slurm job: give them with --slurm")
        return cluster_machines(args.cluster) if args.cluster else local_machines()
    if args.cluster:
        raise ConfigError("--cluster and --slurm: plan for one of them")
    if any(v is None for v in shape):
        raise ConfigError("--slurm needs the job's shape: --nodes N --gpus-per-node G --cpus-per-node C (as `mjp cluster slurm` takes it)")
    for flag, value, least in (
        ("--nodes", args.nodes, 1),
        ("--gpus-per-node", args.gpus_per_node, 0),
        ("--cpus-per-node", args.cpus_per_node, 1),
    ):
        if value < least:
            raise ConfigError(f"{flag} {value}: allowed is {least} or more")
    return slurm_machines(args.nodes, args.gpus_per_node, args.cpus_per_node)


def _slurm_jobs(plan: Plan, time_limit: str) -> str:
    """How many starts of a job with this ``--time`` the sweep takes (each resumes the last; the
    first 180 s of each before the signal are not counted as lost, start-up is)."""
    import math

    from sweep.cluster.slurm.shape import time_limit_s

    usable_h = max(0.0, time_limit_s(time_limit) - 180 - 120) / 3600  # the signal's lead, and a start (Ray, MLflow, a resume)
    if usable_h <= 0:
        raise ConfigError(
            f"--time {time_limit}: no training fits in it (a job is signalled 180 s before its end and starts in about 120 s)"
        )
    starts = math.ceil(plan.wall_hours / usable_h) if plan.wall_hours != math.inf else 0
    return f"with --time {time_limit}: about {starts} start{'s' if starts != 1 else ''} of the job (it requeues itself at its limit)"


def cmd_sweep_plan(args: argparse.Namespace) -> int:
    from sweep.study.cli_overrides import set_overrides
    from sweep.study.load import load_study

    study = load_study(args.study, smoke=args.smoke, overrides=set_overrides(args), files=False)  # run's validation, less the files
    machines = _machines(args)
    if args.img_per_s is not None and args.img_per_s <= 0:
        raise ConfigError(f"--img-per-s {args.img_per_s}: allowed is a positive number of images per second")
    plan = make_plan(study, machines, args.img_per_s)
    from sweep.console.commands_shown import for_terminal
    from sweep.study.load import MAX_TRIALS

    print(for_terminal(describe(study, plan, machines)))
    if args.slurm and args.time:
        print(for_terminal(_slurm_jobs(plan, args.time)))
    if study.num_trials > MAX_TRIALS:
        print(for_terminal(f"note: `mjp sweep run` refuses more than {MAX_TRIALS:,} trials unless given --max-trials {study.num_trials}"))
    return 0
