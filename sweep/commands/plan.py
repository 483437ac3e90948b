"""``mjp sweep plan STUDY``: what a study costs before it runs (trials, epochs, images, GPU-hours and
wall time on this machine or on cluster.yaml's nodes), and the sizes it refuses."""

from __future__ import annotations

import argparse
from typing import Any

from sweep.cluster.plan import Machines, Plan, cluster_machines, duration_text, local_machines, make_plan
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
            f"each trial asks for {plan.cpus_per_trial:g} CPUs and {plan.gpus_per_trial:g} GPUs",
            f"on {machines.name}: {fits}",
            f"throughput {plan.img_per_s:,.0f} img/s per trial: {plan.img_per_s_source}",
            f"estimate: {duration_text(plan.trial_hours)} per trial, {duration_text(plan.wall_hours)} wall, {plan.gpu_hours:,.1f} GPU-hours"
            f" (training only: start-up and evaluation not counted"
            f"{'; ASHA stops some trials early, so less' if study.config.scheduler.type == 'asha' else ''})",
        ]
    )


def cmd_sweep_plan(args: argparse.Namespace) -> int:
    from sweep.study.cli_overrides import set_overrides
    from sweep.study.load import load_study

    study = load_study(args.study, smoke=args.smoke, overrides=set_overrides(args), files=False)  # run's validation, less the files
    machines = cluster_machines(args.cluster) if args.cluster else local_machines()
    if args.img_per_s is not None and args.img_per_s <= 0:
        raise ConfigError(f"--img-per-s {args.img_per_s}: allowed is a positive number of images per second")
    plan = make_plan(study, machines, args.img_per_s)
    print(describe(study, plan, machines))
    from sweep.study.load import MAX_TRIALS

    if study.num_trials > MAX_TRIALS:
        print(f"note: `mjp sweep run` refuses more than {MAX_TRIALS:,} trials unless given --max-trials {study.num_trials}")
    return 0
