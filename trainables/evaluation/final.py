"""The end-of-training evaluation of a run: the paper's shuffle metrics on every worker (summed
across workers), then on rank 0 the evaluations configured under ``eval`` (privacy attacks,
robustness, position-embedding analysis), their figures and the model weights, logged to the run.

Robustness runs on rank 0 only: making corruptions is CPU work that rank 0 spreads over its own
cores (``eval.robustness.workers``), and classifying 75 corrupted copies of a thousand images is
seconds on a GPU; sharding it across ranks would save little and need a gather of every error.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any, Callable

import torch

from mjp import keys
from trainables.config.schema import TrainConfig
from trainables.data.datasets import DatasetBundle
from trainables.evaluation.accuracy import evaluate_shuffles
from trainables.evaluation.suite import extra_evaluations, run_title
from trainables.tracking.runs import RunTracker


def final_evaluation(
    cfg: TrainConfig,
    model: torch.nn.Module,
    bundle: DatasetBundle,
    val_loader: Any,
    session: Any,
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
    figures, notes, texts = extra_evaluations(cfg, model, bundle, session.device, metrics, what=("privacy", "robustness", "pe"))
    if tracker is not None:
        tracker.set_tags({keys.notes_tag(name): "; ".join(lines) for name, lines in notes.items() if lines})
        for text, name in texts:
            tracker.log_text(text, name)
    if tracker is not None and skipped:
        tracker.log_text("\n".join(skipped) + "\n", "data/skipped_images.txt")  # the paths of rank 0's shard
    if tracker is not None:
        from trainables.evaluation.figures import shuffle_accuracy_figure

        figures.append((shuffle_accuracy_figure(metrics, cfg.eval.shuffle_ratios, run_title(cfg)), "top1_vs_shuffle_ratio.png"))
        for figure, name in figures:
            tracker.log_figure(figure, name)
        if cfg.tracking.log_checkpoint:
            with tempfile.TemporaryDirectory() as d:
                path = Path(d) / "model.pt"
                torch.save(model.state_dict(), path)
                tracker.log_artifact(path, "checkpoint")
    return metrics
