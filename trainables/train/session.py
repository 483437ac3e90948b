"""Where a training loop runs, and what it reports to: the two sessions of the worker loop.

- ``RayTrainSession``: one data-parallel worker of a ``TorchTrainer`` (``ray.train``): DDP model,
  sharded loaders, checkpoints registered by the Train controller.
- ``TuneSession``: the loop runs inside the Tune trial's own process (``ray.tune``): a 1-worker
  run needs no worker group, no controller and no second process, which is what made every
  trial spend tens of seconds starting up. Tune persists its checkpoints and restores them on
  retry and on ``Tuner.restore``.

Both hand checkpoints over as a directory; the loop never sees which one it has.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader


@contextlib.contextmanager
def _as_directory(checkpoint: Any) -> Iterator[Path | None]:
    """A Ray checkpoint (Train's or Tune's) as a local directory for the ``with`` block; None without one."""
    if checkpoint is None:
        yield None
    else:
        with checkpoint.as_directory() as d:
            yield Path(d)


@dataclass
class RayTrainSession:
    """One worker of a ``TorchTrainer`` (Ray Train V2)."""

    def __post_init__(self) -> None:
        import ray.train
        import ray.train.torch

        self._train, self._torch = ray.train, ray.train.torch
        ctx = ray.train.get_context()
        self.rank, self.world = ctx.get_world_rank(), ctx.get_world_size()
        self.device = ray.train.torch.get_device()
        self.node_id = ray.get_runtime_context().get_node_id()

    def prepare_model(self, model: nn.Module, find_unused_parameters: bool) -> nn.Module:
        kwargs = {"find_unused_parameters": find_unused_parameters} if self.world > 1 else None
        return self._torch.prepare_model(model, parallel_strategy_kwargs=kwargs)

    def prepare_loader(self, loader: DataLoader) -> DataLoader:
        return self._torch.prepare_data_loader(loader, add_dist_sampler=False)  # our samplers shard

    def restored(self) -> contextlib.AbstractContextManager[Path | None]:
        return _as_directory(self._train.get_checkpoint())

    def report(self, metrics: dict[str, Any], checkpoint_dir: Path | None) -> None:
        ckpt = self._train.Checkpoint.from_directory(str(checkpoint_dir)) if checkpoint_dir else None
        self._train.report(metrics, checkpoint=ckpt)

    def wait_until_reports_taken(self) -> None:
        """Block until Ray Train's controller has taken every worker's reports so far.

        The controller polls each worker (every 2 s; a poll takes at most one report) and
        registers a checkpoint once it holds that report from every worker; an error it sees
        first restarts the workers from the checkpoint before, losing this one (rank 0 still
        uploading it while rank 1, with nothing to upload, has already failed). A report is
        taken when the poll that read it marks its queue's task done (``Queue.join``); the
        barrier holds each worker until every worker's has been. An error raised after can only
        be seen in the poll that took the last report or a later one, and the controller
        registers a poll's reports before it looks at its errors. The queue is Ray Train V2's
        own (no public handle in Ray 2.60)."""
        import torch.distributed as dist
        from ray.train.v2._internal.execution.context import get_train_context

        get_train_context().get_result_queue().join()
        if self.world > 1:
            dist.barrier()

    def train_iterator(self, cfg: Any) -> Any:
        """This worker's shard of the Ray Data training split (the TorchTrainer split it)."""
        return self._train.get_dataset_shard("train")


@dataclass
class TuneSession:
    """The loop inside the Tune trial's process: rank 0 of 1."""

    use_gpu: bool = False

    def __post_init__(self) -> None:
        from ray import tune

        self._tune = tune
        self.rank, self.world = 0, 1
        self.device = torch.device("cuda" if self.use_gpu and torch.cuda.is_available() else "cpu")

    @property
    def node_id(self) -> str:
        """The Ray node of this process (asked when needed: asking starts a local Ray where none runs)."""
        import ray

        return ray.get_runtime_context().get_node_id()

    def prepare_model(self, model: nn.Module, find_unused_parameters: bool) -> nn.Module:
        return model.to(self.device)

    def prepare_loader(self, loader: DataLoader) -> DataLoader:
        return loader

    def restored(self) -> contextlib.AbstractContextManager[Path | None]:
        return _as_directory(self._tune.get_checkpoint())

    def report(self, metrics: dict[str, Any], checkpoint_dir: Path | None) -> None:
        from ray.tune import Checkpoint

        self._tune.report(metrics, checkpoint=Checkpoint.from_directory(str(checkpoint_dir)) if checkpoint_dir else None)

    def wait_until_reports_taken(self) -> None:
        """Nothing to wait for: ``tune.report`` returns only once the trial's driver has taken the
        report (checkpoint included) and asked for the next."""

    def train_iterator(self, cfg: Any) -> Any:
        """The whole Ray Data training split (one worker), executed across the cluster."""
        from trainables.data.ray_data import train_dataset

        return train_dataset(cfg).iterator()
