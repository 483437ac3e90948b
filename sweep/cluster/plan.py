"""What a study will cost before it starts (``mjp sweep plan``; ``commands/plan.py`` prints it).

Trials, epochs, the resources each trial asks for, how many run at once on the machines described
(this machine, or a ``ray up`` cluster file) and the wall time and GPU-hours that follow from a
throughput figure. The plan names where the figure comes from: a short measurement on this
machine (CPU trials), BENCHMARKS.md (GPU trials: its DeiT-S target, which no run has measured yet),
or ``--img-per-s``. Training images only: start-up and evaluation are not counted, and ASHA makes
the real time shorter.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainables.config.schema import TrainConfig
from trainables.errors import ConfigError

#: vCPUs and GPUs of the instance types cluster.yaml names (AWS's published specifications),
#: for node types whose ``resources`` leave them to Ray's detection
INSTANCE_TYPES: dict[str, tuple[int, int]] = {
    "p4d.24xlarge": (96, 8),
    "p4de.24xlarge": (96, 8),
    "p5.48xlarge": (192, 8),
    "g5.xlarge": (4, 1),
    "g5.12xlarge": (48, 4),
    "g5.48xlarge": (192, 8),
    "m6i.4xlarge": (16, 0),
    "c6i.16xlarge": (64, 0),
}


#: BENCHMARKS.md, GPU rows: the 500-step DeiT-S + MJP run's target per GPU (bf16 + compile; not measured)
DEIT_S_TARGET_IMG_PER_S_PER_GPU = 7_000.0


@dataclass(frozen=True)
class Machines:
    """What trials can be placed on: the name, and the CPUs and GPUs of the nodes that train."""

    name: str
    cpus: float
    gpus: int
    local: bool = False


@dataclass(frozen=True)
class Plan:
    trials: int
    epochs: int
    train_images: int
    images_note: str
    cpus_per_trial: float
    gpus_per_trial: float
    concurrent: int
    img_per_s: float
    img_per_s_source: str
    capacity: int

    @property
    def trial_hours(self) -> float:
        return self.epochs * self.train_images / self.img_per_s / 3600

    @property
    def wall_hours(self) -> float:
        return math.ceil(self.trials / self.concurrent) * self.trial_hours if self.concurrent else math.inf

    @property
    def gpu_hours(self) -> float:
        return self.trials * self.trial_hours * self.gpus_per_trial


def local_machines() -> Machines:
    import torch

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return Machines(
        f"this machine ({counted(os.cpu_count() or 1, 'CPU')}, {counted(gpus, 'GPU')})", float(os.cpu_count() or 1), gpus, local=True
    )


def cluster_machines(path: str | Path) -> Machines:
    """The largest cluster ``path`` can scale to: every worker node type at ``max_workers``
    (CPUs and GPUs from ``resources``, else from the instance type); the head node trains nothing."""
    from sweep.cluster.check import validate_cluster_config

    prepared = validate_cluster_config(path)
    cpus, gpus = 0.0, 0
    for name, node in prepared.get("available_node_types", {}).items():
        if name == prepared.get("head_node_type"):
            continue
        resources = node.get("resources") or {}
        instance = (node.get("node_config") or {}).get("InstanceType")
        known = INSTANCE_TYPES.get(instance) if instance else None
        if ("CPU" not in resources or "GPU" not in resources) and known is None:
            raise ConfigError(
                f"{path}: available_node_types.{name}.resources: give CPU and GPU "
                f"(instance type {instance!r} is not one the plan knows: {', '.join(INSTANCE_TYPES)})"
            )
        count = int(node.get("max_workers", 0))
        cpus += count * float(resources.get("CPU", known[0] if known else 0))
        gpus += count * int(resources.get("GPU", known[1] if known else 0))
    return Machines(f"{path} at its largest ({counted(round(cpus), 'CPU')}, {counted(gpus, 'GPU')} on worker nodes)", cpus, gpus)


def slurm_machines(nodes: int, gpus_per_node: int, cpus_per_node: int) -> Machines:
    """A Slurm job's nodes (``mjp cluster slurm``): every node trains, the first less the one CPU
    its driver, MLflow server and gate keep."""
    cpus = nodes * cpus_per_node - (1 if cpus_per_node > 1 else 0)
    each = f"{counted(cpus_per_node, 'CPU')}, {counted(gpus_per_node, 'GPU')}"
    return Machines(f"a Slurm job of {counted(nodes, 'node')} x ({each})", float(cpus), nodes * gpus_per_node)


def train_images(cfg: TrainConfig) -> tuple[int, str]:
    """Training images per epoch (after ``data.train_limit``) and where the count comes from."""
    from trainables.data.info import planned_data_info

    info, absent = planned_data_info(cfg)
    n, note = info.train_size, absent or f"{cfg.data.name} as found"
    if cfg.data.train_limit is not None and cfg.data.train_limit < n:
        n, note = cfg.data.train_limit, f"data.train_limit={cfg.data.train_limit}"
    return n, note  # repeated augmentation keeps an epoch at the dataset's size (timm's sampler)


def data_shape(cfg: TrainConfig) -> Any:
    """The data's ``DataShape``; where the files are absent here, the dataset's published shape."""
    from trainables.data.info import planned_data_info

    return planned_data_info(cfg)[0].shape


def measure_cpu_img_per_s(cfg: TrainConfig, image_size: int, in_chans: int, num_classes: int, threads: int, seconds: float = 2.0) -> float:
    """Images per second of the plain model's forward + backward + AdamW on this machine's CPU,
    with a synthetic batch of at most 32 images ([B, C, H, W]): two untimed steps, then steps
    until ``seconds`` have passed (at least three), on ``threads`` threads (a trial's CPUs)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        return _steps_per_s(cfg, image_size, in_chans, num_classes, seconds)
    finally:
        torch.set_num_threads(before)


def _steps_per_s(cfg: TrainConfig, image_size: int, in_chans: int, num_classes: int, seconds: float) -> float:
    import torch

    from trainables.data.info import DataShape
    from trainables.train.engine import build_model

    plain = cfg.model_copy(update={"mjp": None, "model": cfg.model.model_copy(update={"pretrained_file": None})})
    model = build_model(plain, DataShape(num_classes, in_chans, image_size))  # MJP costs ~1.00x a timm step (BENCHMARKS.md, bench_mjp)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    batch = min(cfg.data.batch_size, 32)
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(batch, in_chans, image_size, image_size, generator=generator)
    y = torch.randint(0, num_classes, (batch,), generator=generator)
    timed, start = -2, 0.0
    while timed < 3 or time.perf_counter() - start < seconds:
        if timed == 0:
            start = time.perf_counter()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        timed += 1
    return timed * batch / (time.perf_counter() - start)


def make_plan(study: Any, machines: Machines, img_per_s: float | None = None) -> Plan:
    cfg = study.base
    s = cfg.scaling
    gpus = s.num_workers * s.gpus_per_worker if s.use_gpu else 0.0
    cpus = s.cpus_per_worker if s.in_process else study.config.driver_cpus + s.num_workers * s.cpus_per_worker  # as Tune reserves it
    capacity = math.floor(machines.gpus / gpus) if gpus else int(machines.cpus // cpus)
    if machines.local and not gpus:
        capacity = max(capacity, study.max_concurrent)  # a local Ray is started with CPUs enough for max_concurrent trials
    concurrent = max(0, min(study.max_concurrent, study.num_trials, capacity))
    shape = data_shape(cfg)
    from trainables.launch.preflight import check_attention

    check_attention(cfg, shape)
    images, note = train_images(cfg)
    if img_per_s is not None:
        rate, source = img_per_s, "--img-per-s"
    elif gpus:
        if cfg.model.name != "deit_small_patch16_224":
            raise ConfigError(
                f"no GPU throughput of {cfg.model.name} is recorded in BENCHMARKS.md; "
                f"measure one (benchmarks/bench_gpu_train.py) and pass --img-per-s"
            )
        rate = DEIT_S_TARGET_IMG_PER_S_PER_GPU * gpus
        source = (
            f"BENCHMARKS.md's DeiT-S target of {DEIT_S_TARGET_IMG_PER_S_PER_GPU:,.0f} img/s per GPU x {gpus:g} "
            f"(a target: no GPU run has measured it)"
        )
    else:
        threads = max(1, int(cpus))
        share = min(1.0, machines.cpus / max(1, concurrent * threads)) if machines.local else 1.0
        rate = measure_cpu_img_per_s(cfg, shape.img_size, shape.in_chans, shape.num_classes, threads) * share
        shared = f", x {share:.2f}: {counted(concurrent, 'trial')} share {counted(machines.cpus, 'CPU')}" if share < 1 else ""
        steps = f"2 s of steps on {counted(min(cfg.data.batch_size, 32), 'synthetic image')}, {counted(threads, 'thread')}"
        source = f"measured now on this CPU ({steps}){shared}"
    return Plan(study.num_trials, cfg.optim.epochs, images, note, cpus, gpus, concurrent, rate, source, capacity)


def duration_text(hours: float) -> str:
    if hours == math.inf:
        return "never (no trial fits)"
    if hours < 1:
        return f"{hours * 60:.1f} min"
    if hours < 48:
        return f"{hours:.1f} h"
    return f"{hours / 24:.1f} days"


def counted(n: float, noun: str) -> str:
    """``n`` and ``noun``, plural unless ``n`` is one: ``1 CPU``, ``2 CPUs``, ``0.5 GPUs``."""
    return f"{n:g} {noun}{'s' * (n != 1)}"
