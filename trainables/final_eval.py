"""The end-of-training evaluation of a run: the paper's shuffle metrics on every worker (summed
across workers), then on rank 0 the evaluations configured under ``eval`` (privacy attacks, ...),
the figures and the model weights, logged to the run."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any, Callable

import torch

from trainables.config import TrainConfig
from trainables.data import DatasetBundle
from trainables.engine import evaluate_shuffles
from trainables.train_state import TrainState, unwrap
from trainables.tracking import RunTracker


def final_evaluation(
    cfg: TrainConfig,
    state: TrainState,
    bundle: DatasetBundle,
    val_loader: Any,
    session: Any,
    tracker: RunTracker | None,
    reduce: Callable[[torch.Tensor], torch.Tensor],
) -> dict[str, float]:
    """Metrics of the final evaluation (rank 0 also returns what only it computes)."""
    metrics = evaluate_shuffles(cfg, state.model, val_loader, session.device, session.rank, reduce)
    skipped: list[str] = []
    if bundle.skipped_log is not None:  # data.on_bad_image=skip: counted over every worker's shard
        from trainables.data import skipped_images

        skipped = skipped_images(bundle.skipped_log)
        metrics["data/skipped_images"] = float(reduce(torch.tensor([float(len(skipped))], device=session.device)).item())
    if session.rank != 0:
        return metrics
    model = unwrap(state.model)
    title = f"{cfg.model.name} / {cfg.variant}"
    figures = []
    if cfg.eval.privacy is not None:
        from trainables.privacy_eval import privacy_step

        scores, grid, notes = privacy_step(cfg, model, bundle.val, session.device, title)
        metrics.update(scores)
        figures.append((grid, "privacy_reconstructions.png"))
        if notes and tracker is not None:
            tracker.set_tags({"mjp.privacy.notes": "; ".join(notes)})
    if tracker is not None and skipped:
        tracker.log_text("\n".join(skipped) + "\n", "data/skipped_images.txt")  # the paths of rank 0's shard
    if tracker is not None:
        from trainables.figures import shuffle_accuracy_figure

        figures.append((shuffle_accuracy_figure(metrics, cfg.eval.shuffle_ratios, title), "top1_vs_shuffle_ratio.png"))
        for figure, name in figures:
            tracker.log_figure(figure, name)
        if cfg.tracking.log_checkpoint:
            with tempfile.TemporaryDirectory() as d:
                path = Path(d) / "model.pt"
                torch.save(model.state_dict(), path)
                tracker.log_artifact(path, "checkpoint")
    return metrics
