"""The training split's sample order: one order per (``data.seed``, epoch), sharded over workers.

Plain runs use torch's ``DistributedSampler`` (seeded with ``data.seed + epoch``). Repeated
augmentation (DeiT: each image 3 times per epoch, the copies on different workers) uses timm's
``RepeatAugSampler``, which seeds its shuffle with the epoch alone: every seed of a study would
see the same data order. ``SeededRepeatAugSampler`` seeds it with ``data.seed + epoch`` as well.
"""

from __future__ import annotations

from typing import Any

from timm.data.distributed_sampler import RepeatAugSampler
from torch.utils.data import Dataset, DistributedSampler


class SeededRepeatAugSampler(RepeatAugSampler):
    """timm's repeated-augmentation sampler with its shuffle seeded by ``seed + epoch``."""

    def __init__(self, dataset: Dataset, *, seed: int, **kwargs: Any):
        super().__init__(dataset, **kwargs)
        self.seed = seed
        self.set_epoch(0)

    def set_epoch(self, epoch: int) -> None:
        # timm's __iter__ seeds a torch.Generator with ``self.epoch``
        super().set_epoch(self.seed + epoch)


def train_sampler(dataset: Dataset, *, seed: int, repeats: int, rank: int, world: int) -> DistributedSampler | SeededRepeatAugSampler:
    """The training sampler of data-parallel worker ``rank`` of ``world`` (call ``set_epoch`` each epoch)."""
    if repeats > 1:
        return SeededRepeatAugSampler(dataset, seed=seed, num_replicas=world, rank=rank, shuffle=True, num_repeats=repeats)
    return DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=True, seed=seed)
