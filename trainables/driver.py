"""The driver of one training run: Ray start-up, the MLflow run, and the ``TorchTrainer``.

``run_training`` is what ``mjp train`` calls; ``tune_trainable`` (Ray Train V2 pattern) is the
function Ray Tune runs per trial: it builds a ``TorchTrainer`` for the trial and reports back
to Tune through ``TuneReportCallback``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Workers run this interpreter, not `uv run` again (see sweep/cli.py); must precede `import ray`.
os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")

import ray  # noqa: E402
import ray.train  # noqa: E402
from ray.train.torch import TorchConfig, TorchTrainer  # noqa: E402

from trainables.config import TrainConfig, flat_params
from trainables.engine import preflight
from trainables.tracking import TAG_KIND, TAG_VARIANT, RunTracker, tracking_uri
from trainables.worker import train_loop_per_worker

#: Worker-group start on a 2-core machine can pass Ray's 60 s default.
os.environ.setdefault("RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S", "300")


def ensure_ray(address: str | None = None, *, num_cpus: int | None = None) -> None:
    """Connect to ``address`` / ``$RAY_ADDRESS``, or start a private local Ray in this process.

    A bare ``ray.init()`` would join whatever cluster ``/tmp/ray`` last named, even a dead one.
    """
    if ray.is_initialized():
        return
    address = address or os.environ.get("RAY_ADDRESS")
    if address:
        ray.init(address=address, log_to_driver=True)
    else:
        # The dashboard (ray[default]) serves the state API that frees the placement groups of
        # trials stopped early (ray#54305), so it stays on.
        ray.init(address="local", num_cpus=num_cpus, log_to_driver=True)


def storage_path(cfg: TrainConfig) -> str:
    """Where Ray keeps checkpoints: ``tracking.storage_path`` (local dir or s3:// / gs://) or ./runs."""
    path = cfg.tracking.storage_path or "runs"
    return path if "://" in path else str(Path(path).resolve())


def make_trainer(cfg: TrainConfig, uri: str, run_id: str | None, name: str, callbacks: list | None = None, storage: str | None = None) -> TorchTrainer:
    """A ``TorchTrainer`` for ``cfg``; ``name`` must be deterministic so a restarted driver finds its state."""
    s = cfg.scaling
    resources = {"CPU": s.cpus_per_worker, **({"GPU": s.gpus_per_worker} if s.use_gpu else {})}
    return TorchTrainer(
        train_loop_per_worker,
        train_loop_config={"train_config": cfg.model_dump(mode="json"), "tracking_uri": uri, "mlflow_run_id": run_id},
        torch_config=TorchConfig(backend="nccl" if s.use_gpu else "gloo"),
        scaling_config=ray.train.ScalingConfig(num_workers=s.num_workers, use_gpu=s.use_gpu, resources_per_worker=resources),
        run_config=ray.train.RunConfig(
            name=name,
            storage_path=storage or storage_path(cfg),
            failure_config=ray.train.FailureConfig(max_failures=cfg.runtime.max_failures),
            checkpoint_config=ray.train.CheckpointConfig(num_to_keep=2),
            callbacks=callbacks,
        ),
    )


def start_run(cfg: TrainConfig, uri: str, *, run_name: str | None = None, tags: dict[str, str] | None = None, parent_run_id: str | None = None) -> RunTracker:
    """Create the MLflow run of a training and log its config."""
    tracker = RunTracker.create(
        uri,
        cfg.tracking.experiment,
        run_name=run_name or cfg.tracking.run_name or f"{cfg.model.name}-{cfg.variant}",
        tags={TAG_KIND: "train", TAG_VARIANT: cfg.variant, "mjp.model": cfg.model.name, "mjp.dataset": cfg.data.name, **(tags or {})},
        parent_run_id=parent_run_id,
    )
    tracker.log_params(flat_params(cfg))
    return tracker


@dataclass
class TrainingOutcome:
    run_id: str
    metrics: dict[str, Any]
    error: BaseException | None


def run_training(cfg: TrainConfig, *, address: str | None = None, name: str | None = None) -> TrainingOutcome:
    """One training run, distributed per ``cfg.scaling``, logged to MLflow; checked before launch."""
    preflight(cfg)
    uri = tracking_uri(cfg.tracking.uri)
    ensure_ray(address)
    tracker = start_run(cfg, uri)
    trainer = make_trainer(cfg, uri, tracker.run_id, name or f"train-{tracker.run_id[:12]}")
    try:
        result = trainer.fit()
        error = result.error
        metrics = dict(result.metrics or {})
    except Exception as err:  # Ray raises TrainingFailedError when retries are exhausted
        error, metrics = err, {}
    tracker.set_status("FAILED" if error else "FINISHED")
    if error:
        tracker.set_tags({"mjp.error": str(error)[:5000]})
    return TrainingOutcome(tracker.run_id, metrics, error)


def tune_trainable(params: dict[str, Any], sweep: dict[str, Any]) -> None:
    """One Tune trial (Ray Train V2 pattern): a ``TorchTrainer`` for the sampled ``params``.

    ``sweep`` (passed with ``tune.with_parameters``): ``name``, ``base_tree``, ``extra`` (--set
    overrides), ``presets`` (labels -> keys), ``uri``, ``experiment``, ``parent_run_id``, ``storage``. The trial's MLflow child
    run is found by its trial-id tag or created, so a restored sweep re-attaches to it.
    """
    from ray import tune
    from ray.tune.integration.ray_train import TuneReportCallback

    from trainables.config import build_config, expand_presets
    from trainables.tracking import TAG_SAMPLE_PREFIX, TAG_STUDY, TAG_TRIAL_ID

    trial_id = tune.get_context().get_trial_id()
    cfg = build_config(sweep["base_tree"], {**sweep["extra"], **expand_presets(params, sweep["presets"])}, source=f"trial {trial_id}")
    tracker = find_child_run(sweep["uri"], sweep["experiment"], sweep["parent_run_id"], trial_id)
    if tracker is None:
        tracker = start_run(
            cfg, sweep["uri"], run_name=f"{sweep['name']}-{trial_id}",
            tags={TAG_TRIAL_ID: trial_id, TAG_STUDY: sweep["name"], **{f"{TAG_SAMPLE_PREFIX}{k}": str(v) for k, v in params.items()}},
            parent_run_id=sweep["parent_run_id"],
        )
    else:
        tracker.set_status("RUNNING")
    trainer = make_trainer(cfg, sweep["uri"], tracker.run_id, f"{sweep['name']}-{trial_id}", [TuneReportCallback()], sweep["storage"])
    try:
        error = trainer.fit().error
    except Exception as err:  # TrainingFailedError once retries are exhausted
        error = err
    if error is not None:
        tracker.set_tags({"mjp.error": str(error)[:5000]})
        tracker.set_status("FAILED")
        raise RuntimeError(f"trial {trial_id} failed: {error}")
    tracker.set_status("FINISHED")


def find_child_run(uri: str, experiment: str, parent_run_id: str, trial_id: str) -> RunTracker | None:
    """The MLflow run of trial ``trial_id`` under sweep run ``parent_run_id``, if it exists."""
    from trainables.tracking import TAG_PARENT, TAG_TRIAL_ID

    return RunTracker.find(uri, experiment, {TAG_TRIAL_ID: trial_id, TAG_PARENT: parent_run_id})
