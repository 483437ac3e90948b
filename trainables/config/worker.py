"""The seam between a trial and its training workers: the frozen record the driver hands each
worker (``WorkerInput``), and the session a worker trains and reports through (``Session``),
which ``trainables/train/session.py`` implements twice (a Ray Train worker, a Tune trial's own
process). It sits on the config floor so the data, evaluation and train rooms can all name it."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from trainables.config.schema import TrainConfig

if TYPE_CHECKING:
    import torch
    from torch import nn
    from torch.utils.data import DataLoader


@dataclass(frozen=True)
class WorkerInput:
    """What a trial's driver hands each training worker: the trial's config, the MLflow run the
    workers write to (``run_id`` in the store at ``tracking_uri``; None: nothing is logged) and
    the epochs at which a scheduler decides (checkpoints are kept there too)."""

    config: TrainConfig
    tracking_uri: str | None = None
    run_id: str | None = None
    checkpoint_epochs: tuple[int, ...] = ()


class Session(Protocol):
    """Where a training loop runs and what it reports to. ``rank``/``world``: this worker among
    the run's; ``device``: where its model and batches live; ``node_id``: its Ray node."""

    rank: int
    world: int
    device: torch.device

    @property
    def node_id(self) -> str: ...

    def prepare_model(self, model: nn.Module, find_unused_parameters: bool) -> nn.Module:
        """The model placed on ``device`` (and wrapped for data parallelism across workers)."""
        ...

    def prepare_loader(self, loader: DataLoader) -> DataLoader:
        """The loader as this worker reads it (moved to the device where the session does that)."""
        ...

    def restored(self) -> contextlib.AbstractContextManager[Path | None]:
        """The directory of the checkpoint to resume from, for a ``with`` block; None on a fresh start."""
        ...

    def report(self, metrics: dict[str, Any], checkpoint_dir: Path | None) -> None:
        """One epoch's metrics, with the directory of its checkpoint when one was saved."""
        ...

    def wait_until_reports_taken(self) -> None:
        """Block until what this run's workers reported so far (checkpoints included) is the
        driver's: a failure raised after it resumes from the last reported checkpoint."""
        ...

    def train_iterator(self, cfg: TrainConfig) -> Any:
        """This worker's Ray Data training split (``data.loader: ray_data``)."""
        ...
