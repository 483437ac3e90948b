"""The training loop of one worker, behind a session (``trainables.train.session``).

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

import time
from collections.abc import Iterable
from typing import cast

import torch
import torch.distributed as dist
from torch import nn

from trainables.config.schema import TrainConfig
from trainables.config.seeds import derive_seed
from trainables.config.worker import Session, WorkerInput
from trainables.data.datasets import dataset_inputs, load_datasets
from trainables.data.loaders import make_loaders
from trainables.evaluation.accuracy import evaluate
from trainables.evaluation.final import final_evaluation
from trainables.scratch import scratch_folder
from trainables.tracking import schema
from trainables.tracking.epochs import EpochLogger
from trainables.tracking.runs import RunTracker
from trainables.train.engine import build_algorithm, build_model, build_state, make_mixup, seed_everything, train_one_epoch
from trainables.train.state import TrainState, unwrap


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


def train_loop(worker: WorkerInput, session: Session) -> None:
    """Train ``worker.config`` to its last epoch (or from its latest checkpoint), reporting through
    ``session`` and logging to ``worker``'s MLflow run (rank 0; every rank tags its node)."""
    cfg, tracking_uri, run_id = worker.config, worker.tracking_uri, worker.run_id
    rank = session.rank
    seed_everything(derive_seed(cfg.runtime.seed, "process", rank))
    bundle = load_datasets(cfg)
    loaders = make_loaders(cfg, bundle, session)
    train_loader, val_loader = loaders.train, loaders.val
    model = build_model(cfg, bundle.shape)
    algorithm = build_algorithm(cfg, model, rank, session.device)
    if cfg.runtime.channels_last:
        model = model.to(memory_format=torch.channels_last)
    # E_unk / DAL head sit out of the graph while the jigsaw is warming up.
    model = session.prepare_model(model, find_unused_parameters=cfg.optim.jigsaw_warmup_epochs > 0)
    if cfg.runtime.compile:
        model = cast(nn.Module, torch.compile(model))  # an OptimizedModule; torch types it as a plain callable
    state: TrainState = build_state(cfg, model, len(train_loader), session.world, algorithm)
    mixup = make_mixup(cfg, bundle.shape.num_classes)
    with session.restored() as directory:
        resumed = directory is not None
        if directory is not None:
            state.restore(directory)
    tracker = RunTracker(tracking_uri, run_id) if rank == 0 and run_id and tracking_uri else None
    if run_id and tracking_uri:
        record_node(RunTracker(tracking_uri, run_id) if tracker is None else tracker, rank, session.node_id)
    log = EpochLogger(tracker) if tracker else None
    if tracker is not None:
        for dataset in dataset_inputs(cfg, bundle):
            tracker.log_dataset(dataset.name, dataset.digest, dataset.source, dataset.profile, dataset.context)
    saves = checkpoint_epochs(cfg, worker.checkpoint_epochs)
    last_save = time.monotonic()

    while state.epoch < cfg.optim.epochs:
        loaders.set_epoch(state.epoch)
        metrics = train_one_epoch(cfg, state, train_loader, session.device, mixup, log.running if log else None)
        state.epoch += 1
        metrics.update(evaluate(unwrap(model), val_loader, session.device, all_reduce))
        if log:
            log.epoch(metrics, state.epoch)
        if state.epoch == cfg.optim.epochs:
            final = final_evaluation(cfg, unwrap(state.model), bundle, val_loader, session, tracker, all_reduce)
            metrics.update(final)
            if log:
                log.final(final)
        with scratch_folder() as d:  # Ray copies it before report returns; a kill leaves it to the next one made
            save = rank == 0 and checkpoint_due(cfg, state.epoch, saves, time.monotonic() - last_save)
            if save:
                state.save(d)
                last_save = time.monotonic()
            session.report({**metrics, "epoch": state.epoch}, d if save else None)
        if cfg.runtime.fail_after_epoch == state.epoch and not resumed:
            session.wait_until_reports_taken()  # the failure comes after the checkpoint the restart resumes from
            raise InjectedFailure(f"runtime.fail_after_epoch={state.epoch}: injected failure after the checkpoint")


def record_node(tracker: RunTracker, rank: int, node_id: str) -> None:
    """Tag the run with the Ray node this worker trains on; rank 0 also appends it to the run's
    node history (a trial restarted on another node after a node loss names both)."""
    tags = {f"{schema.TAG_NODE_PREFIX}{rank}": node_id}
    if rank == 0:
        seen = tracker.tags().get(schema.TAG_NODES_SEEN, "")
        nodes = [n for n in seen.split(",") if n]
        tags[schema.TAG_NODES_SEEN] = ",".join(nodes if nodes[-1:] == [node_id] else [*nodes, node_id])
    tracker.set_tags(tags)


def train_worker(worker: WorkerInput) -> None:
    """Ray Train's entry point on each worker of a ``TorchTrainer`` (bound to ``worker`` by
    ``trainables.launch.trial.make_trainer``)."""
    from trainables.process_start import start_up_done
    from trainables.train.session import RayTrainSession

    start_up_done()  # imported: the start-up's objects frozen, Python's collector back for the training
    train_loop(worker, RayTrainSession())


def train_in_trial_process(worker: WorkerInput) -> None:
    """A 1-worker trial's training in the Tune trial's own process (``TuneSession``), on
    ``scaling.cpus_per_worker`` threads."""
    from trainables.process_start import start_up_done
    from trainables.train.session import TuneSession

    start_up_done()  # imported: the start-up's objects frozen, Python's collector back for the training
    torch.set_num_threads(max(1, int(worker.config.scaling.cpus_per_worker)))
    train_loop(worker, TuneSession(worker.config.scaling.use_gpu))
