"""What an evaluation gives a run (``EvaluationResult``), the title its figures carry, and how it
is logged into the run. No torch: every evaluation module and the registry import it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from trainables.tracking import schema

if TYPE_CHECKING:
    from trainables.config.schema import TrainConfig
    from trainables.tracking.runs import RunTracker


@dataclass
class EvaluationResult:
    """``metrics`` by key; ``figures`` as (matplotlib Figure, artifact file); ``texts`` as (text,
    artifact file); ``notes``: why a metric is absent or how it was made (logged as a tag)."""

    metrics: dict[str, float] = field(default_factory=dict)
    figures: list[tuple[Any, str]] = field(default_factory=list)
    texts: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def run_title(cfg: TrainConfig) -> str:
    """The title an evaluation's figures carry."""
    return f"{cfg.model.name} / {cfg.variant}"


def log_evaluation(tracker: RunTracker, name: str, result: EvaluationResult) -> None:
    """An evaluation's notes (as its notes tag), texts and figures into a run; its metrics are the
    caller's to log (the training logs them with the final epoch)."""
    if result.notes:
        tracker.set_tags({schema.notes_tag(name): "; ".join(result.notes)})
    for text, file in result.texts:
        tracker.log_text(text, file)
    for figure, file in result.figures:
        tracker.log_figure(figure, file)
