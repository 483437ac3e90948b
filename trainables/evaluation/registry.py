"""The registry of the paper's evaluations.

Each evaluation is a function ``(cfg, model, bundle, device, title) -> EvaluationResult`` in its
own module, listed once in ``EVALUATIONS`` with the ``eval`` section that configures it, that
section's default (what ``mjp evaluate`` runs with when the config has none) and the metric keys
it reports (what a study's objectives may name). Adding an evaluation is one entry here and its
own file. The modules are imported when an evaluation runs: a study's validation reads
``reported_metrics`` without torch.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mjp import keys
from trainables.evaluation.result import EvaluationResult

if TYPE_CHECKING:
    from trainables.config.schema import TrainConfig


@dataclass(frozen=True)
class Evaluation:
    """One of the paper's evaluations. ``section``: its field of ``cfg.eval`` (None: always runs);
    ``default``: that section when a config has none; ``run``: imports its module when called."""

    name: str
    section: str | None
    default: Callable[[], Any] | None
    reported: Callable[[TrainConfig], set[str]]
    run: Callable[..., EvaluationResult]

    def configured(self, cfg: TrainConfig) -> bool:
        return self.section is None or getattr(cfg.eval, self.section) is not None


def _shuffle(*args: Any) -> EvaluationResult:
    from trainables.evaluation.accuracy import shuffle_evaluation

    return shuffle_evaluation(*args)


def _robustness(*args: Any) -> EvaluationResult:
    from trainables.evaluation.robustness import robustness_evaluation

    return robustness_evaluation(*args)


def _pe(*args: Any) -> EvaluationResult:
    from trainables.evaluation.pe import pe_evaluation

    return pe_evaluation(*args)


def _privacy(*args: Any) -> EvaluationResult:
    from trainables.evaluation.privacy import privacy_evaluation

    return privacy_evaluation(*args)


def _section(name: str, **kwargs: Any) -> Callable[[], Any]:
    def make() -> Any:
        from trainables.config import schema as config_schema

        return getattr(config_schema, name)(**kwargs)

    return make


def _shuffle_keys(cfg: TrainConfig) -> set[str]:
    return {keys.VAL_CONSISTENCY, keys.VAL_DIFF_NORM} | {keys.top1_shuffled_key(r) for r in cfg.eval.shuffle_ratios}


def _privacy_keys(cfg: TrainConfig) -> set[str]:
    return {keys.privacy_key(s, m) for s in cfg.eval.privacy.settings for m in ("mse", "psnr", "ssim", "fft2d")}


#: the paper's evaluations, in the order ``mjp evaluate`` lists them. Robustness and PE report
#: keys that depend on the data (ImageNet-1K or not), so objectives may not name them.
EVALUATIONS: dict[str, Evaluation] = {
    e.name: e
    for e in (
        Evaluation("shuffle", None, None, _shuffle_keys, _shuffle),
        Evaluation("robustness", "robustness", _section("RobustnessSection", workers=os.cpu_count() or 1), lambda cfg: set(), _robustness),
        Evaluation("pe", "pe_analysis", _section("PEAnalysisSection"), lambda cfg: set(), _pe),
        Evaluation("privacy", "privacy", _section("PrivacySection"), _privacy_keys, _privacy),
    )
}


def reported_metrics(cfg: TrainConfig) -> set[str]:
    """Every metric key a training of ``cfg`` reports (what a study's objectives may name)."""
    found = set(keys.EPOCH_METRICS)
    for evaluation in EVALUATIONS.values():
        if evaluation.configured(cfg):
            found |= evaluation.reported(cfg)
    return found
