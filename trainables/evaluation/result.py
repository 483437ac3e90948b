"""What an evaluation gives a run (``EvaluationResult``), what its pre-flight check is given
(``PreflightFacts``), the title its figures carry, and how a result is logged into the run. No
torch: every evaluation module and the registry import it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from trainables.errors import ConfigError
from trainables.tracking import schema

if TYPE_CHECKING:
    from trainables.config.schema import TrainConfig
    from trainables.data.info import DataInfo
    from trainables.tracking.runs import RunTracker


@dataclass
class EvaluationResult:
    """``metrics`` by key; ``figures`` as (matplotlib Figure, artifact file); ``texts`` as (text,
    artifact file); ``notes``: why a metric is absent or how it was made (logged as a tag)."""

    metrics: dict[str, float] = field(default_factory=dict)
    figures: list[tuple[Any, str]] = field(default_factory=list)
    texts: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class PreflightFacts:
    """What the pre-flight (``trainables/launch/preflight.py``) learnt before it gives each configured
    evaluation's ``check`` its turn: the data, the model built on the meta device (no weights, no
    memory; with MJP), the jigsaw patches of one image, and whether files may be read (``False``
    for ``mjp sweep plan``, made where the cluster's data may be absent)."""

    info: DataInfo
    model: Any
    patches: int
    files: bool
    #: ``trainables/launch/weights_file.check_weights_file(label, path)``, handed down: evaluation sits below launch
    check_weights_file: Callable[[str, str], None]

    def check_ratio(self, key: str, ratio: float) -> None:
        """A shuffle ratio of ``key`` against ``mjp.masking.check_grid_ratio`` (the one rule) on this grid."""
        from mjp.masking import check_grid_ratio

        try:
            check_grid_ratio(key, ratio, self.patches)
        except ValueError as err:
            raise ConfigError(str(err)) from None


S = TypeVar("S")


def given(value: S | None, key: str) -> S:
    """A config value an evaluation needs, set wherever the evaluation runs or is checked: its
    ``eval`` section (the registry runs and checks an evaluation only where its section is set;
    ``mjp evaluate`` fills in the defaults) or a key its pre-flight check required."""
    if value is None:
        raise ValueError(f"{key} is not set; this evaluation runs only where it is")
    return value


def eval_seed(cfg: TrainConfig) -> int:
    """``eval.seed``, which a ``TrainConfig`` derives from ``runtime.seed`` where none is given."""
    if cfg.eval.seed is None:
        raise ValueError("eval.seed is not set; a TrainConfig derives it from runtime.seed")
    return cfg.eval.seed


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
