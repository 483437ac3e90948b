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
        from trainables.image_folder import skipped_images

        skipped = skipped_images(bundle.skipped_log)
        metrics["data/skipped_images"] = float(reduce(torch.tensor([float(len(skipped))], device=session.device)).item())
    if session.rank != 0:
        return metrics
    model = unwrap(state.model)
    figures, notes, texts = extra_evaluations(cfg, model, bundle, session.device, metrics, what=("privacy", "robustness", "pe"))
    if tracker is not None:
        tracker.set_tags({keys.notes_tag(name): "; ".join(lines) for name, lines in notes.items() if lines})
        for text, name in texts:
            tracker.log_text(text, name)
    if tracker is not None and skipped:
        tracker.log_text("\n".join(skipped) + "\n", "data/skipped_images.txt")  # the paths of rank 0's shard
    if tracker is not None:
        from trainables.figures import shuffle_accuracy_figure

        figures.append((shuffle_accuracy_figure(metrics, cfg.eval.shuffle_ratios, run_title(cfg)), "top1_vs_shuffle_ratio.png"))
        for figure, name in figures:
            tracker.log_figure(figure, name)
        if cfg.tracking.log_checkpoint:
            with tempfile.TemporaryDirectory() as d:
                path = Path(d) / "model.pt"
                torch.save(model.state_dict(), path)
                tracker.log_artifact(path, "checkpoint")
    return metrics


def run_title(cfg: TrainConfig) -> str:
    return f"{cfg.model.name} / {cfg.variant}"


def extra_evaluations(
    cfg: TrainConfig, model: torch.nn.Module, bundle: DatasetBundle | None, device: torch.device, metrics: dict[str, float], what: tuple[str, ...]
) -> tuple[list[tuple[Any, str]], dict[str, list[str]], list[tuple[str, str]]]:
    """The evaluations in ``what`` that ``cfg.eval`` configures, on one process: their metrics go
    into ``metrics``; returns (figure, file) pairs, notes per evaluation and (text, file) artifacts."""
    title = run_title(cfg)
    figures: list[tuple[Any, str]] = []
    notes: dict[str, list[str]] = {}
    texts: list[tuple[str, str]] = []
    if "privacy" in what and cfg.eval.privacy is not None:
        from trainables.privacy_eval import privacy_step

        scores, grid, notes["privacy"] = privacy_step(cfg, model, bundle.val, device, title)
        metrics.update(scores)
        figures.append((grid, "privacy_reconstructions.png"))
    if "robustness" in what and cfg.eval.robustness is not None:
        from trainables.figures import corruption_figure
        from trainables.robustness_eval import errors_json, robustness_step

        result = robustness_step(cfg, model, bundle, device)
        metrics.update(result.metrics)
        notes["robustness"] = result.notes
        texts.append((errors_json(result), "robustness/errors.json"))
        figures.append((corruption_figure(result.errors, f"{title}: corruption error by severity"), "robustness/errors_by_severity.png"))
    if "pe" in what and cfg.eval.pe_analysis is not None:
        from trainables.pe_eval import pe_step

        result = pe_step(cfg, model, bundle, device, title)
        metrics.update(result.metrics)
        notes["pe"] = result.notes
        figures += result.figures
    return figures, notes, texts
