"""The one place the input path is chosen: torch DataLoader (CPU decode), Ray Data, or encoded bytes
decoded on the device (``data/gpu``), per ``data.loader`` and ``data.decode``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from torch.utils.data import DataLoader, Subset

from trainables.config.schema import TrainConfig
from trainables.config.worker import Session
from trainables.data.datasets import DatasetBundle, dataset_size
from trainables.data.info import data_info
from trainables.data.samplers import train_sampler


@dataclass(frozen=True)
class TrainLoaders:
    """One worker's input. ``train`` yields ``(images [B, C, S, S], labels [B])`` on the device or
    the host; ``val``: this worker's validation shard; ``set_epoch(e)`` reshuffles the training
    order for epoch ``e``; ``train_size``: training images per epoch over all workers."""

    train: Any
    val: DataLoader
    set_epoch: Callable[[int], None]
    train_size: int


def _data_seed(cfg: TrainConfig) -> int:
    """``data.seed``: a ``TrainConfig`` derives it from ``runtime.seed`` when not given."""
    if cfg.data.seed is None:
        raise ValueError("data.seed is None; a TrainConfig derives it from runtime.seed when it is not given")
    return cfg.data.seed


def make_loaders(cfg: TrainConfig, bundle: DatasetBundle, session: Session) -> TrainLoaders:
    """Sharded train loader (per-epoch shuffled, seeded by ``data.seed``) and val loader.
    ``session``: the worker's (``rank``, ``world``, ``device``, ``prepare_loader``, ``train_iterator``)."""
    d, rank, world = cfg.data, session.rank, session.world
    common: dict[str, Any] = dict(
        batch_size=d.batch_size, num_workers=d.loader_workers, pin_memory=cfg.scaling.use_gpu, persistent_workers=d.loader_workers > 0
    )
    # Validation: a disjoint shard per worker (no padding duplicates); sums are all-reduced.
    val = session.prepare_loader(DataLoader(Subset(bundle.val, range(rank, dataset_size(bundle.val), world)), shuffle=False, **common))
    if d.loader == "ray_data":
        from trainables.data.ray_data import RayDataLoader, shuffle_buffer_rows

        train_size = min(data_info(cfg).train_size, d.train_limit or 2**62)  # Ray Data reads the split itself
        train = RayDataLoader(
            session.train_iterator(cfg),
            d.batch_size,
            train_size // (d.batch_size * world),
            _data_seed(cfg),
            session.device,
            shuffle_buffer_rows(cfg),
        )
        return TrainLoaders(train, val, train.set_epoch, train_size)
    if d.decode == "gpu":
        return _device_decode_loader(cfg, bundle, session, val)
    sampler = train_sampler(bundle.train, seed=_data_seed(cfg), repeats=d.repeated_aug, rank=rank, world=world)
    loader = DataLoader(bundle.train, sampler=sampler, drop_last=True, **common)
    return TrainLoaders(session.prepare_loader(loader), val, sampler.set_epoch, dataset_size(bundle.train))


def _device_decode_loader(cfg: TrainConfig, bundle: DatasetBundle, session: Session, val: DataLoader) -> TrainLoaders:
    """``data.decode: gpu``: the DataLoader reads encoded files, the training device decodes and augments them."""
    from trainables.data.gpu.augment import DeviceRecipe
    from trainables.data.gpu.decode import DeviceAugmentLoader, EncodedImages, SeededSampler, collate_encoded

    d, rank, seed, dataset = cfg.data, session.rank, _data_seed(cfg), bundle.train
    if not isinstance(dataset, EncodedImages):  # what load_datasets builds for data.decode=gpu
        raise TypeError(f"data.decode=gpu reads an EncodedImages training split, not a {type(dataset).__name__}")
    sampler = SeededSampler(train_sampler(dataset, seed=seed, repeats=d.repeated_aug, rank=rank, world=session.world), seed, rank)
    loader = DataLoader(
        dataset,
        sampler=sampler,
        batch_size=d.batch_size,
        drop_last=True,
        collate_fn=collate_encoded,
        num_workers=d.loader_workers,
        pin_memory=cfg.scaling.use_gpu,
        persistent_workers=d.loader_workers > 0,
    )
    recipe = DeviceRecipe(bundle.shape.img_size, d.augment)
    compile_backend = "inductor" if cfg.runtime.compile else None  # one region for the work after the crop
    train = DeviceAugmentLoader(loader, sampler, recipe, session.device, dataset, bundle.skipped_log, compile_backend=compile_backend)
    return TrainLoaders(train, val, train.set_epoch, len(dataset))
