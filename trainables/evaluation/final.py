"""The end-of-training evaluation of a run: the paper's shuffle metrics on every worker (summed
across workers), then on rank 0 every registered evaluation that runs at the end (``at_end`` in
``registry.py``: robustness, position-embedding analysis, privacy attacks) where ``eval``
configures it, their figures and the model weights, logged to the run.

Robustness runs on rank 0 only: making corruptions is CPU work that rank 0 spreads over its own
cores (``eval.robustness.workers``), and classifying 75 corrupted copies of a thousand images is
seconds on a GPU; sharding it across ranks would save little and need a gather of every error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from trainables.config.schema import TrainConfig
from trainables.config.worker import Session
from trainables.data.datasets import DatasetBundle
from trainables.evaluation.accuracy import SHUFFLE_FIGURE, evaluate_shuffles
from trainables.evaluation.registry import at_end
from trainables.evaluation.result import log_evaluation, run_title
from trainables.evaluation.suite import run_evaluations
from trainables.scratch import scratch_folder
from trainables.tracking import schema
from trainables.tracking.runs import RunTracker


def final_evaluation(
    cfg: TrainConfig,
    model: torch.nn.Module,
    bundle: DatasetBundle,
    val_loader: Any,
    session: Session,
    tracker: RunTracker | None,
    reduce: Callable[[torch.Tensor], torch.Tensor],
) -> dict[str, float]:
    """Metrics of the final evaluation (rank 0 also returns what only it computes). ``model``: the
    trained module itself, not its DDP or compile wrapper."""
    metrics = evaluate_shuffles(cfg, model, val_loader, session.device, session.rank, reduce)
    skipped: list[str] = []
    if bundle.skipped_log is not None:  # data.on_bad_image=skip: counted over every worker's shard
        from trainables.data.folder.image_folder import skipped_images

        skipped = skipped_images(bundle.skipped_log)
        metrics["data/skipped_images"] = float(reduce(torch.tensor([float(len(skipped))], device=session.device)).item())
    if session.rank != 0:
        return metrics
    results = run_evaluations(cfg, model, bundle, session.device, at_end())
    for result in results.values():
        metrics.update(result.metrics)
    if tracker is not None:
        from trainables.evaluation.figures import shuffle_accuracy_figure

        for name, result in results.items():
            log_evaluation(tracker, name, result)
        if skipped:
            tracker.log_text("\n".join(skipped) + "\n", "data/skipped_images.txt")  # the paths of rank 0's shard
        tracker.log_figure(shuffle_accuracy_figure(metrics, cfg.eval.shuffle_ratios, run_title(cfg)), SHUFFLE_FIGURE)
        if cfg.tracking.log_checkpoint:
            with scratch_folder() as d:
                path = d / schema.ARTIFACT_CHECKPOINT_FILE
                torch.save(model.state_dict(), path)
                tracker.log_artifact(path, schema.ARTIFACT_CHECKPOINT_DIR)
    return metrics
