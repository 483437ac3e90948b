"""What Ray Tune runs for each trial (of a sweep, or of ``mjp train``): the MLflow run and the training.

A 1-worker trial trains in the Tune trial's own process (``TuneSession``): no controller, no
worker group, no second process to start and import torch in. A trial of several workers keeps
Ray Train (the V2 pattern): the trial function builds a ``TorchTrainer`` with a deterministic
name and reports back through ``TuneReportCallback``. Either way the trial's MLflow run is found
by its trial-id tag or created, so a restored sweep re-attaches to it.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
from dataclasses import dataclass
from typing import Any

from trainables.config.build import flat_params
from trainables.config.recipe import TrialRecipe
from trainables.config.schema import TrainConfig
from trainables.config.worker import WorkerInput
from trainables.errors import UserError, disk_full_reason
from trainables.tracking import schema
from trainables.tracking.labels import RunLabel, run_label, variant_words
from trainables.tracking.runs import RunTracker


class TrialFailed(RuntimeError):
    """A trial's training failed. ``reason``: one line (the traceback is in the trial's log);
    ``final``: a retry from the checkpoint would fail the same way. Both fields survive the pickling
    that carries the error from the trial to the driver (``__reduce__``)."""

    def __init__(self, reason: str, final: bool = False):
        super().__init__(reason)
        self.reason, self.final = reason, final

    def __reduce__(self) -> tuple[type, tuple[str, bool]]:
        return (TrialFailed, (self.reason, self.final))


def failure_text(err: BaseException) -> str:
    """What a person reads of a failed trial: the reason of the ``TrialFailed`` in ``err``'s chain;
    where Ray hands back only text, its innermost ``Type: message`` line without the class name."""
    cause: BaseException | None = err
    while cause is not None:
        if isinstance(getattr(cause, "reason", None), str) and isinstance(cause, TrialFailed):
            return cause.reason
        cause = cause.__cause__
    for name in (f"{TrialFailed.__module__}.{TrialFailed.__qualname__}", TrialFailed.__qualname__):
        line = one_line_reason(err)
        if line.startswith(name + ": "):
            return line[len(name) + 2 :]
    return one_line_reason(err)


def failure_is_final(err: BaseException | None) -> bool:
    """Whether ``err`` carries a final ``TrialFailed``: Tune restarts the trial anyway (it retries
    every error), and the restart fails at once on its run's ``TAG_ERROR_FINAL``, training nothing."""
    while err is not None:
        if isinstance(err, TrialFailed):
            return err.final
        err = err.__cause__ or getattr(err, "cause", None)  # Ray's RayTaskError holds the trial's error as ``cause``
    return False


@dataclass(frozen=True)
class TrialSpec:
    """What every trial of one Tune run shares (passed to ``tune_trial`` with ``tune.with_parameters``)."""

    name: str  # the sweep's (or training's) name; multi-worker trials' Ray Train runs derive from it
    recipe: TrialRecipe  # how each trial's config is made (its tracking URI is ``uri``)
    uri: str  # the MLflow store every trial writes to, resolved once by the command
    experiment: str
    storage: str  # where multi-worker trials keep their Ray Train state
    study: str | None = None
    parent_run_id: str | None = None
    run_id: str | None = None  # a single training's run, created before launch
    checkpoint_epochs: tuple[int, ...] = ()  # a scheduler's decision epochs (ASHA rungs)
    driver_cpus: float = 0.25

    def label(self, params: dict[str, Any]) -> RunLabel:
        return run_label(self.recipe.config(params), params, self.recipe.presets)


class TrialResources:
    """Tune's reservation for a trial: the worker itself when it trains in the trial's process,
    only the trial function otherwise (the ``TorchTrainer`` reserves its own workers)."""

    def __init__(self, spec: TrialSpec):
        self.spec = spec

    def __call__(self, params: dict[str, Any]) -> Any:
        from ray.tune import PlacementGroupFactory

        s = self.spec.recipe.config(params).scaling
        if not s.in_process:
            return PlacementGroupFactory([{"CPU": self.spec.driver_cpus}])
        return PlacementGroupFactory([worker_resources(s)])


def worker_resources(s: Any) -> dict[str, float]:
    """What one training worker of scaling section ``s`` asks Ray for."""
    return {"CPU": s.cpus_per_worker, **({"GPU": s.gpus_per_worker} if s.use_gpu else {}), **s.worker_resources}


def one_line_reason(err: BaseException) -> str:
    """The line a person reads of an error: the message of the outermost ``UserError`` in its
    chain (written for them: it names the file or value, where the error it was raised from,
    a decoder's, does not), else the innermost ``Type: message`` line (Ray and torch's
    DataLoader wrap a worker's traceback in text: its last such line)."""
    while err.__cause__ is not None and not isinstance(err, UserError):
        err = err.__cause__
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    for line in reversed(lines):
        head = line.split(":", 1)[0]
        if head.replace(".", "").isidentifier() and head.split(".")[-1][:1].isupper() and ":" in line:
            return line[:500]
    return f"{type(err).__name__}: {lines[-1][:500] if lines else ''}".rstrip(": ")


def start_run(
    cfg: TrainConfig, uri: str, *, run_name: str, tags: dict[str, str] | None = None, parent_run_id: str | None = None
) -> RunTracker:
    """Create the MLflow run of a training and log its config."""
    tracker = RunTracker.create(
        uri,
        cfg.tracking.experiment,
        run_name=run_name,
        tags={
            schema.TAG_KIND: schema.KIND_TRAIN,
            schema.TAG_VARIANT: cfg.variant,
            schema.TAG_MODEL: cfg.model.name,
            schema.TAG_DATASET: cfg.data.name,
            **(tags or {}),
        },
        parent_run_id=parent_run_id,
    )
    words = variant_words(cfg.variant)
    tracker.log_params({**flat_params(cfg), "table4.row": words[0] if len(words) == 2 else "-", "table4.name": cfg.variant})
    return tracker


def trial_key(params: dict[str, Any]) -> str:
    """A digest of a trial's sampled params: what identifies a trial that Tune proposes again
    under a new (random) trial id after a resume restored an older experiment state."""
    text = json.dumps(params, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _trial_run(spec: TrialSpec, cfg: TrainConfig, params: dict[str, Any], trial_id: str) -> RunTracker:
    """The trial's MLflow run, created once: looked up by trial id, else an orphan of the same
    params adopted (see ``sweep.tuner.recorder.reopen_children``), else created."""
    tracker: RunTracker | None
    if spec.run_id:
        tracker = RunTracker(spec.uri, spec.run_id)
    else:
        tracker = find_child_run(spec.uri, spec.experiment, spec.parent_run_id, trial_id) or adopt_orphan(spec, params, trial_id)
    if tracker is not None:
        tracker.delete_tag(schema.TAG_ORPHAN)  # restored after all: not for adoption
        tracker.set_status("RUNNING")
        return tracker
    label = run_label(cfg, params, spec.recipe.presets)
    tags = {
        schema.TAG_TRIAL_ID: trial_id,
        schema.TAG_TRIAL_KEY: trial_key(params),
        schema.TAG_LABEL: label.display,
        **{f"{schema.TAG_SAMPLE_PREFIX}{k}": str(v) for k, v in params.items()},
    }
    if spec.study:
        tags[schema.TAG_STUDY] = spec.study
    tags[schema.TAG_NOTE] = (
        f"Trial **{label.display}** of sweep `{spec.name}`: {cfg.model.name} on {cfg.data.name}, "
        f"{cfg.optim.epochs} epochs. Its full config is in the params; the paper's metrics of its final evaluation "
        "are logged once, per epoch the training curves."
    )
    return start_run(cfg, spec.uri, run_name=label.run_name, tags=tags, parent_run_id=spec.parent_run_id)


def make_trainer(worker: WorkerInput, name: str, storage: str, callbacks: list | None = None) -> Any:
    """A ``TorchTrainer`` whose every worker trains ``worker``; ``name`` must be deterministic so a
    restarted driver finds its state."""
    import functools

    import ray.train
    from ray.train.torch import TorchConfig, TorchTrainer

    from trainables.train.loop import train_worker

    cfg = worker.config
    s = cfg.scaling
    resources = worker_resources(s)
    datasets = {}
    if cfg.data.loader == "ray_data":
        from trainables.data.ray_data import train_dataset

        datasets = {"train": train_dataset(cfg)}
    return TorchTrainer(
        functools.partial(train_worker, worker),  # the record is the worker's whole input: no untyped config dict
        torch_config=TorchConfig(backend="nccl" if s.use_gpu else "gloo"),
        scaling_config=ray.train.ScalingConfig(
            num_workers=s.num_workers, use_gpu=s.use_gpu, resources_per_worker=resources, placement_strategy=s.placement
        ),
        datasets=datasets or None,
        dataset_config=ray.train.DataConfig(datasets_to_split=["train"]) if datasets else None,
        run_config=ray.train.RunConfig(
            name=name,
            storage_path=storage,
            failure_config=ray.train.FailureConfig(max_failures=cfg.runtime.max_failures),
            checkpoint_config=ray.train.CheckpointConfig(num_to_keep=2),
            callbacks=callbacks,
        ),
    )


def tune_trial(params: dict[str, Any], spec: TrialSpec) -> None:
    """One trial: ``params`` is what the searcher sampled (empty for ``mjp train``)."""
    from ray import tune

    trial_id = tune.get_context().get_trial_id()
    cfg = spec.recipe.config(params)
    tracker = _trial_run(spec, cfg, params, trial_id)
    earlier = tracker.tags()
    if earlier.get(schema.TAG_ERROR_FINAL):  # Tune retries every failure; a retry would fail the same way
        tracker.set_status("FAILED")
        raise TrialFailed(earlier.get(schema.TAG_ERROR, "failed"), final=True)
    tracker.set_tags({schema.TAG_PROCESS: f"{socket.gethostname()}:{os.getpid()}"})  # this attempt's trial process
    worker = WorkerInput(cfg, spec.uri, tracker.run_id, spec.checkpoint_epochs)
    try:
        if cfg.scaling.in_process:
            from trainables.train.loop import train_in_trial_process

            train_in_trial_process(worker)
        else:
            from ray.tune.integration.ray_train import TuneReportCallback

            trainer = make_trainer(worker, f"{spec.name}-{trial_id}", spec.storage, [TuneReportCallback()])
            trainer.fit()  # raises TrainingFailedError once Ray Train's retries are exhausted
    except Exception as err:  # not BaseException: Tune stops a trial (ASHA) with SystemExit
        reason = one_line_reason(err)
        # Tune's retries (runtime.max_failures) are for a lost worker or node: an error in the
        # input, one that would recur from the checkpoint (a NaN loss, out of memory), or one Ray
        # Train already retried its workers for, ends the trial at once
        final = recurs(err) or disk_full_reason(err) is not None or not cfg.scaling.in_process
        try:
            tracker.set_tags({schema.TAG_ERROR: reason, **({schema.TAG_ERROR_FINAL: "1"} if final else {})})
            tracker.set_status("FAILED")
        except Exception as writing:  # a store on a full disk: the driver ends the sweep, naming it
            if disk_full_reason(writing) is None:
                raise
        raise TrialFailed(reason, final) from err
    tracker.set_status("FINISHED")


def recurs(err: BaseException) -> bool:
    """Whether ``err`` (or an error it wraps) would happen again on a retry from the checkpoint:
    bad input (a ``UserError``: an unreadable image, a wrong value), the loss went non-finite, or
    the device ran out of memory. Also where only text is left of it: torch's DataLoader cannot
    rebuild an error whose ``__init__`` takes more than the message (``UnreadableImage``) and
    re-raises a worker's as a ``RuntimeError`` holding its traceback."""
    import torch

    from trainables.data.folder.image_folder import UnreadableImage
    from trainables.train.engine import NonFiniteLossError

    recurring = (UserError, NonFiniteLossError, torch.OutOfMemoryError)
    seen: BaseException | None = err
    while seen is not None:
        if isinstance(seen, recurring):
            return True
        seen = seen.__cause__ or seen.__context__
    named = one_line_reason(err).split(":", 1)[0].rsplit(".", 1)[-1]
    return named in {kind.__name__ for kind in (UnreadableImage, NonFiniteLossError)}


def adopt_orphan(spec: TrialSpec, params: dict[str, Any], trial_id: str) -> RunTracker | None:
    """The sweep's orphaned child run of these params (its trial was lost with the driver before
    Tune saved it), now the run of ``trial_id``; None when there is none."""
    if spec.parent_run_id is None:
        return None
    orphan = RunTracker.find(
        spec.uri, spec.experiment, {schema.TAG_PARENT: spec.parent_run_id, schema.TAG_TRIAL_KEY: trial_key(params), schema.TAG_ORPHAN: "1"}
    )
    if orphan is None:
        return None
    orphan.set_tags({schema.TAG_TRIAL_ID: trial_id})
    orphan.delete_tag(schema.TAG_ORPHAN)
    return orphan


def find_child_run(uri: str, experiment: str, parent_run_id: str | None, trial_id: str) -> RunTracker | None:
    """The MLflow run of trial ``trial_id`` under sweep run ``parent_run_id``, if it exists."""
    if parent_run_id is None:
        return None
    return RunTracker.find(uri, experiment, {schema.TAG_TRIAL_ID: trial_id, schema.TAG_PARENT: parent_run_id})
