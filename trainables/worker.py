"""The training loop of one worker, behind a session (``trainables.session``).

Every epoch all workers report metrics; at checkpoint epochs rank 0 attaches the training state.
Checkpoints are written every ``runtime.checkpoint_every`` epochs, at the last epoch, at the
epochs a scheduler decides at (ASHA's rungs, passed in as ``checkpoint_epochs``), at an injected
failure, and at the end of any epoch that ends ``runtime.checkpoint_minutes`` or more after the
last checkpoint (so a lost worker costs at most that much, or one epoch); a restart resumes from
the latest one. Rank 0 alone writes to MLflow; MLflow
steps are epochs, and a resumed run does not log again the epochs (or running-loss steps) that
were logged before it stopped.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any, Iterable

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Subset

from mjp import keys
from trainables.config import TrainConfig
from trainables.data import DatasetBundle, data_info, dataset_inputs, load_datasets
from trainables.engine import build_algorithm, build_model, build_state, evaluate, make_mixup, seed_everything, train_one_epoch
from trainables.final_eval import final_evaluation
from trainables.samplers import train_sampler
from trainables.seeds import derive_seed
from trainables.train_state import TrainState
from trainables.tracking import EpochLogger, RunTracker


class InjectedFailure(RuntimeError):
    """Raised by ``runtime.fail_after_epoch`` to test recovery."""


def all_reduce(t: torch.Tensor) -> torch.Tensor:
    """Sum over the data-parallel workers (identity for one worker)."""
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        t = t.clone()
        dist.all_reduce(t)
    return t


def checkpoint_epochs(cfg: TrainConfig, extra: Iterable[int] = ()) -> set[int]:
    """The epochs (1-based) after which a checkpoint is saved."""
    epochs, every = cfg.optim.epochs, cfg.runtime.checkpoint_every
    chosen = set(range(every, epochs + 1, every)) | {epochs} | {e for e in extra if 1 <= e <= epochs}
    if cfg.runtime.fail_after_epoch:
        chosen.add(cfg.runtime.fail_after_epoch)
    return chosen


def checkpoint_due(cfg: TrainConfig, epoch: int, saves: set[int], since_last_s: float) -> bool:
    """Whether the checkpoint after ``epoch`` (1-based) is written: a chosen epoch, or time's up."""
    return epoch in saves or since_last_s >= 60 * cfg.runtime.checkpoint_minutes


def make_loaders(cfg: TrainConfig, bundle: DatasetBundle, session: Any, train_size: int) -> tuple[Any, Any, DataLoader]:
    """Sharded train loader (per-epoch shuffled, seeded by ``data.seed``) and val loader."""
    d, rank, world = cfg.data, session.rank, session.world
    common = dict(batch_size=d.batch_size, num_workers=d.loader_workers, pin_memory=cfg.scaling.use_gpu, persistent_workers=d.loader_workers > 0)
    # Validation: a disjoint shard per worker (no padding duplicates); sums are all-reduced.
    val = session.prepare_loader(DataLoader(Subset(bundle.val, range(rank, len(bundle.val), world)), shuffle=False, **common))
    if d.loader == "ray_data":
        from trainables.data_ray import RayDataLoader, shuffle_buffer_rows

        train = RayDataLoader(session.train_iterator(cfg), d.batch_size, train_size // (d.batch_size * world), d.seed, session.device, shuffle_buffer_rows(cfg))
        return train, train, val
    if d.decode == "gpu":
        return _device_decode_loader(cfg, bundle, session, val)
    sampler = train_sampler(bundle.train, seed=d.seed, repeats=d.repeated_aug, rank=rank, world=world)
    train = DataLoader(bundle.train, sampler=sampler, drop_last=True, **common)
    return sampler, session.prepare_loader(train), val


def _device_decode_loader(cfg: TrainConfig, bundle: DatasetBundle, session: Any, val: Any) -> tuple[Any, Any, Any]:
    """``data.decode: gpu``: the DataLoader reads encoded files, the training device decodes and augments them."""
    from trainables.data_gpu import DeviceAugmentLoader, SeededSampler, collate_encoded
    from trainables.device_augment import DeviceRecipe

    d, rank = cfg.data, session.rank
    sampler = SeededSampler(train_sampler(bundle.train, seed=d.seed, repeats=d.repeated_aug, rank=rank, world=session.world), d.seed, rank)
    loader = DataLoader(bundle.train, sampler=sampler, batch_size=d.batch_size, drop_last=True, collate_fn=collate_encoded,
                        num_workers=d.loader_workers, pin_memory=cfg.scaling.use_gpu, persistent_workers=d.loader_workers > 0)
    train = DeviceAugmentLoader(loader, sampler, DeviceRecipe(bundle.shape.img_size, d.augment), session.device, bundle.train, bundle.skipped_log)
    return train, train, val


def train_loop(cfg: TrainConfig, session: Any, *, tracking_uri: str | None, run_id: str | None, extra_checkpoints: Iterable[int] = ()) -> None:
    """Train ``cfg`` to its last epoch (or from its latest checkpoint), reporting through ``session``."""
    rank = session.rank
    seed_everything(derive_seed(cfg.runtime.seed, "process", rank))
    bundle = load_datasets(cfg)
    train_size = min(data_info(cfg).train_size, cfg.data.train_limit or 2**62) if cfg.data.loader == "ray_data" else len(bundle.train)
    sampler, train_loader, val_loader = make_loaders(cfg, bundle, session, train_size)
    model = build_model(cfg, bundle.shape)
    algorithm = build_algorithm(cfg, model, rank, session.device)
    if cfg.runtime.channels_last:
        model = model.to(memory_format=torch.channels_last)
    # E_unk / DAL head sit out of the graph while the jigsaw is warming up.
    model = session.prepare_model(model, find_unused_parameters=cfg.optim.jigsaw_warmup_epochs > 0)
    if cfg.runtime.compile:
        model = torch.compile(model)
    state: TrainState = build_state(cfg, model, len(train_loader), session.world, algorithm)
    mixup = make_mixup(cfg, bundle.shape.num_classes)
    with session.restored() as directory:
        resumed = directory is not None
        if resumed:
            state.restore(directory)
    tracker = RunTracker(tracking_uri, run_id) if rank == 0 and run_id and tracking_uri else None
    if run_id and tracking_uri:
        record_node(RunTracker(tracking_uri, run_id) if tracker is None else tracker, rank, session.node_id)
    log = EpochLogger(tracker) if tracker else None
    for dataset in dataset_inputs(cfg, bundle) if tracker else []:
        tracker.log_dataset(dataset.name, dataset.digest, dataset.source, dataset.profile, dataset.context)
    saves = checkpoint_epochs(cfg, extra_checkpoints)
    last_save = time.monotonic()

    while state.epoch < cfg.optim.epochs:
        sampler.set_epoch(state.epoch)
        metrics = train_one_epoch(cfg, state, train_loader, session.device, mixup, log.running if log else None)
        state.epoch += 1
        metrics.update(evaluate(model, val_loader, session.device, all_reduce))
        if log:
            log.epoch(metrics, state.epoch)
        if state.epoch == cfg.optim.epochs:
            final = final_evaluation(cfg, state, bundle, val_loader, session, tracker, all_reduce)
            metrics.update(final)
            if log:
                log.final(final)
        with tempfile.TemporaryDirectory() as d:
            save = rank == 0 and checkpoint_due(cfg, state.epoch, saves, time.monotonic() - last_save)
            if save:
                state.save(d)
                last_save = time.monotonic()
            session.report({**metrics, "epoch": state.epoch}, Path(d) if save else None)
        if cfg.runtime.fail_after_epoch == state.epoch and not resumed:
            raise InjectedFailure(f"runtime.fail_after_epoch={state.epoch}: injected failure after the checkpoint")


def record_node(tracker: RunTracker, rank: int, node_id: str) -> None:
    """Tag the run with the Ray node this worker trains on; rank 0 also appends it to the run's
    node history (a trial restarted on another node after a node loss names both)."""
    tags = {f"{keys.TAG_NODE_PREFIX}{rank}": node_id}
    if rank == 0:
        seen = tracker.client.get_run(tracker.run_id).data.tags.get(keys.TAG_NODES_SEEN, "")
        nodes = [n for n in seen.split(",") if n]
        tags[keys.TAG_NODES_SEEN] = ",".join(nodes if nodes[-1:] == [node_id] else [*nodes, node_id])
    tracker.set_tags(tags)


def train_loop_per_worker(config: dict[str, Any]) -> None:
    """Ray Train entry point. ``config``: ``train_config`` (dict), ``tracking_uri``, ``mlflow_run_id``,
    ``checkpoint_epochs``."""
    from trainables.session import RayTrainSession

    cfg = TrainConfig.model_validate(config["train_config"])
    train_loop(cfg, RayTrainSession(), tracking_uri=config.get("tracking_uri"), run_id=config.get("mlflow_run_id"), extra_checkpoints=config.get("checkpoint_epochs", ()))
