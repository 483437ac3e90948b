"""Which of the paper's extra evaluations a run's config asks for (robustness, PE analysis,
privacy), run one after another on rank 0, and the title its figures carry."""

from __future__ import annotations

from typing import Any

import torch

from trainables.config.schema import TrainConfig
from trainables.data.datasets import DatasetBundle


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
        from trainables.evaluation.privacy import privacy_step

        scores, grid, notes["privacy"] = privacy_step(cfg, model, bundle.val, device, title)
        metrics.update(scores)
        figures.append((grid, "privacy_reconstructions.png"))
    if "robustness" in what and cfg.eval.robustness is not None:
        from trainables.evaluation.figures import corruption_figure
        from trainables.evaluation.robustness import errors_json, robustness_step

        result = robustness_step(cfg, model, bundle, device)
        metrics.update(result.metrics)
        notes["robustness"] = result.notes
        texts.append((errors_json(result), "robustness/errors.json"))
        figures.append((corruption_figure(result.errors, f"{title}: corruption error by severity"), "robustness/errors_by_severity.png"))
    if "pe" in what and cfg.eval.pe_analysis is not None:
        from trainables.evaluation.pe import pe_step

        result = pe_step(cfg, model, bundle, device, title)
        metrics.update(result.metrics)
        notes["pe"] = result.notes
        figures += result.figures
    return figures, notes, texts
