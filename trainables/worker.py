"""The Ray Train worker loop: one data-parallel worker of a training run.

Every epoch all workers report metrics; rank 0 attaches a checkpoint (model, optimiser,
scheduler, scaler, RNG states, epoch) and alone writes to MLflow. A restarted worker group
resumes from ``ray.train.get_checkpoint()``; MLflow steps are epochs, so a re-run epoch
overwrites nothing and adds no second run.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import ray.train
import ray.train.torch
import torch
import torch.distributed as dist
from timm.data.distributed_sampler import RepeatAugSampler
from torch.utils.data import DataLoader, DistributedSampler, Subset

from trainables.config import TrainConfig
from trainables.data import load_datasets
from trainables.engine import (
    TrainState,
    build_model,
    build_state,
    evaluate,
    evaluate_shuffles,
    make_mixup,
    seed_everything,
    train_one_epoch,
    unwrap,
)
from trainables.figures import shuffle_accuracy_figure
from trainables.tracking import RunTracker

CHECKPOINT_FILE = "state.pt"


class InjectedFailure(RuntimeError):
    """Raised by ``runtime.fail_after_epoch`` to test recovery."""


def _all_reduce(t: torch.Tensor) -> torch.Tensor:
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        t = t.clone()
        dist.all_reduce(t)
    return t


def _loaders(cfg: TrainConfig, rank: int, world: int):
    bundle = load_datasets(cfg)
    d = cfg.data
    if d.repeated_aug > 1:
        sampler = RepeatAugSampler(bundle.train, num_replicas=world, rank=rank, shuffle=True, num_repeats=d.repeated_aug)
    else:
        sampler = DistributedSampler(bundle.train, num_replicas=world, rank=rank, shuffle=True, seed=cfg.runtime.seed)
    common = dict(batch_size=d.batch_size, num_workers=d.loader_workers, pin_memory=cfg.scaling.use_gpu, persistent_workers=d.loader_workers > 0)
    train = DataLoader(bundle.train, sampler=sampler, drop_last=True, **common)
    # Validation: a disjoint shard per worker (no padding duplicates); sums are all-reduced.
    val = DataLoader(Subset(bundle.val, range(rank, len(bundle.val), world)), shuffle=False, **common)
    if len(train) == 0:
        raise ValueError(f"data.batch_size={d.batch_size} x {world} workers exceeds the {len(bundle.train)} training images; lower it")
    # Our samplers already shard; Ray moves the batches to the worker's device.
    train = ray.train.torch.prepare_data_loader(train, add_dist_sampler=False)
    val = ray.train.torch.prepare_data_loader(val, add_dist_sampler=False)
    return bundle, sampler, train, val


def train_loop_per_worker(config: dict[str, Any]) -> None:
    """Ray Train entry point. ``config``: ``train_config`` (dict), ``tracking_uri``, ``mlflow_run_id``."""
    cfg = TrainConfig.model_validate(config["train_config"])
    ctx = ray.train.get_context()
    rank, world = ctx.get_world_rank(), ctx.get_world_size()
    seed_everything(cfg.runtime.seed * 1000 + rank)
    bundle, sampler, train_loader, val_loader = _loaders(cfg, rank, world)
    device = ray.train.torch.get_device()

    model = build_model(cfg, bundle.shape)
    model.mjp_reseed(cfg.mjp.seed * 1000 + rank)
    if cfg.runtime.channels_last:
        model = model.to(memory_format=torch.channels_last)
    # E_unk / DAL head sit out of the graph while the jigsaw is warming up.
    unused = cfg.optim.jigsaw_warmup_epochs > 0
    model = ray.train.torch.prepare_model(model, parallel_strategy_kwargs={"find_unused_parameters": unused} if world > 1 else None)
    if cfg.runtime.compile:
        model = torch.compile(model)
    state: TrainState = build_state(cfg, model, len(train_loader), world)
    mixup = make_mixup(cfg, bundle.shape.num_classes)

    checkpoint = ray.train.get_checkpoint()
    resumed = checkpoint is not None
    if resumed:
        with checkpoint.as_directory() as d:
            state.load_state_dict(torch.load(Path(d) / CHECKPOINT_FILE, map_location="cpu", weights_only=False))
    tracker = RunTracker(config["tracking_uri"], config["mlflow_run_id"]) if rank == 0 and config.get("mlflow_run_id") else None

    def log_running(m: dict[str, float], step: int) -> None:  # every runtime.log_every steps, by global step
        tracker.log_metrics({f"{k}_running": v for k, v in m.items() if k.startswith("train/loss")}, step)

    while state.epoch < cfg.optim.epochs:
        sampler.set_epoch(state.epoch)
        metrics = train_one_epoch(cfg, state, train_loader, device, mixup, log_running if tracker else None)
        state.epoch += 1
        metrics.update(evaluate(model, val_loader, device, _all_reduce))
        final = state.epoch == cfg.optim.epochs
        if final:
            metrics.update(evaluate_shuffles(cfg, model, val_loader, device, rank, _all_reduce))
            if rank == 0 and cfg.eval.privacy is not None:
                metrics.update(_privacy(cfg, state, bundle.val, device, tracker))
        metrics["epoch"] = state.epoch
        if tracker is not None:
            tracker.log_metrics(metrics, step=state.epoch)
            if final:
                _log_final_artifacts(cfg, tracker, state, metrics)
        with tempfile.TemporaryDirectory() as d:
            ckpt = None
            if rank == 0:
                torch.save(state.state_dict(), Path(d) / CHECKPOINT_FILE)
                ckpt = ray.train.Checkpoint.from_directory(d)
            ray.train.report(metrics, checkpoint=ckpt)
        if cfg.runtime.fail_after_epoch == state.epoch and not resumed:
            raise InjectedFailure(f"runtime.fail_after_epoch={state.epoch}: injected failure after the checkpoint")


def _privacy(cfg: TrainConfig, state: TrainState, val_set, device: torch.device, tracker: RunTracker | None) -> dict[str, float]:
    import matplotlib.pyplot as plt

    from trainables.privacy_eval import fixed_images, reconstruction_grid, run_privacy_eval

    images, labels = fixed_images(val_set, cfg.eval.privacy.images)
    metrics, results, notes = run_privacy_eval(unwrap(state.model), images.to(device), labels.to(device), cfg.eval.privacy, seed=cfg.eval.seed)
    if tracker is not None:
        fig = reconstruction_grid(results, f"{cfg.model.name} / {cfg.variant}: {cfg.eval.privacy.attack} attack")
        tracker.log_figure(fig, "privacy_reconstructions.png")
        plt.close(fig)
        if notes:
            tracker.set_tags({"mjp.privacy.notes": "; ".join(notes)})
    return metrics


def _log_final_artifacts(cfg: TrainConfig, tracker: RunTracker, state: TrainState, metrics: dict[str, float]) -> None:
    import matplotlib.pyplot as plt

    fig = shuffle_accuracy_figure(metrics, cfg.eval.shuffle_ratios, f"{cfg.model.name} / {cfg.variant}")
    tracker.log_figure(fig, "top1_vs_shuffle_ratio.png")
    plt.close(fig)
    if cfg.tracking.log_checkpoint:
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "model.pt"
            torch.save(unwrap(state.model).state_dict(), path)
            tracker.log_artifact(path, "checkpoint")
