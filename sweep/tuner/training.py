"""One training (``mjp train``) as a Tune run of one trial: the same trial function, checkpoints,
retries (``runtime.max_failures``), console and MLflow run as a sweep's trials."""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from typing import Any, TextIO

from ray import tune

from mjp import keys
from sweep.console.view import ConsoleView
from sweep.tuner.recorder import SweepRecorder, run_closed_on_error
from sweep.tuner.storage import announce, start_logging, storage_root
from sweep.tuner.tuner import failure_config
from trainables.config.recipe import TrialRecipe
from trainables.config.schema import TrainConfig
from trainables.launch.ray_runtime import check_local_resources, ensure_ray, require_cluster
from trainables.launch.trial import TrialResources, TrialSpec, failure_text, start_run, tune_trial
from trainables.tracking import schema
from trainables.tracking.labels import run_label
from trainables.tracking.runs import MlflowProgress
from trainables.tracking.store import check_store_writable, tracking_uri


@dataclass
class TrainingOutcome:
    run_id: str
    metrics: dict[str, Any]
    error: str | None
    interrupted: bool = False
    log_file: str | None = None
    uri: str = ""  # the MLflow store the run is in (resolved once, by ``run_training``)


def run_training(
    cfg: TrainConfig, *, address: str | None = None, uri: str | None = None, verbose: bool = False, stream: TextIO | None = None
) -> TrainingOutcome:
    """One training run (``mjp train``), as a Tune run of one trial: the same trial function,
    checkpoints, retries (``runtime.max_failures``) and console as a sweep's trials. ``uri``: the
    MLflow store (default ``cfg.tracking.uri``), resolved here once; the run logs it as its config's."""
    from trainables.launch.preflight import check_disk_space, preflight

    checked = preflight(cfg)
    check_local_resources(cfg, address)
    require_cluster(address)
    for warning in cfg.warnings():
        announce(stream, f"warning: {warning}")
    uri = tracking_uri(uri or cfg.tracking.uri)
    check_store_writable(uri)
    recipe = TrialRecipe(cfg.model_dump(mode="json"), source="the training's config").writing_to(uri)
    cfg = recipe.config({})  # what the run logs and trains: the store it really writes to
    label = run_label(cfg)
    name = cfg.tracking.run_name or label.run_name
    storage = storage_root(
        cfg.tracking.storage_path or os.environ.get("MJP_SWEEP_STORAGE") or "runs"
    )  # a cluster's bucket (cluster.yaml), else ./runs
    check_disk_space(storage, checked.checkpoint_bytes, f"{cfg.model.name} ({checked.parameters / 1e6:.1f}M parameters)")
    stamp = f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"
    log = start_logging(f"{storage}/{stamp}", stamp, verbose, file_name="train.log")
    announce(stream, f"train {label.display}: {cfg.optim.epochs} epochs on {cfg.data.name}\n  logs: {log}")
    s = cfg.scaling
    ensure_ray(
        address,
        num_cpus=None if address else max(os.cpu_count() or 1, math.ceil(s.cpus_per_worker * s.num_workers + 0.25)),
        verbose=verbose,
        dashboard=not s.in_process,
    )
    tracker = start_run(cfg, uri, run_name=name, tags={schema.TAG_LABEL: label.display})
    with run_closed_on_error(tracker):  # from its first moment: a signal while the Tuner is built leaves it KILLED
        spec = TrialSpec(
            name=stamp,
            recipe=recipe,
            uri=uri,
            experiment=cfg.tracking.experiment,
            storage=f"{storage}/{stamp}-train",
            run_id=tracker.run_id,
        )
        view = ConsoleView(
            f"train {label.display}",
            lambda p: label.display,
            lambda p: cfg.optim.epochs,
            [(keys.VAL_TOP1, "max")],
            1,
            per_epoch_lines=True,
            stream=stream,
            progress_of=MlflowProgress(uri, cfg.tracking.experiment, run_id=tracker.run_id),
        )
        recorder = SweepRecorder(uri, cfg.tracking.experiment, None, 1, None)
        tuner = tune.Tuner(
            tune.with_resources(tune.with_parameters(tune_trial, spec=spec), TrialResources(spec)),
            tune_config=tune.TuneConfig(num_samples=1),
            run_config=tune.RunConfig(
                name=stamp,
                storage_path=storage,
                callbacks=[recorder, view],
                verbose=2 if verbose else 0,
                failure_config=failure_config(cfg),
            ),
        )
        from trainables.launch.signals import ctrl_c_restored_after

        with ctrl_c_restored_after():
            result = tuner.fit()[0]
    if recorder.interrupted and tracker.status == "RUNNING":
        tracker.set_tags({schema.TAG_INTERRUPTED: "interrupted"})
        tracker.set_status("KILLED")
    error = failure_text(result.error) if result.error else None
    return TrainingOutcome(tracker.run_id, dict(result.metrics or {}), error, recorder.interrupted, str(log), uri)
