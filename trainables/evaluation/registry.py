"""The registry of the paper's evaluations: ``EVALUATIONS`` is the one list of them. The end of a
training (``final.py``), ``mjp evaluate`` (its ``--what`` and that option's help), the pre-flight
(``trainables/launch/preflight.py``) and a study's objectives (``reported_metrics``) all read it.

To add an evaluation:

1. write its module, ``trainables/evaluation/<name>.py``, with a function
   ``(cfg, model, bundle, device, title) -> EvaluationResult`` (``result.py``) and, if the
   evaluation can be refused before a training starts, a check ``(cfg, facts: PreflightFacts) -> None``
   raising ``ConfigError`` (a ``UserError``) in one line that names the key, the value and what is
   allowed;
2. add one ``Evaluation`` to ``EVALUATIONS`` below: its name (what ``--what`` takes), a one-line
   ``description`` (``mjp evaluate --help``), ``run`` and ``check`` as ``Lazy("module:function")``,
   the metric keys it reports if a study's objectives may name them (``reported``), and, if a config
   section switches it on, that section's class (``section``) and its field of ``EvalSection``
   (``field``). The section itself is config, so it lives with the config: a class in
   ``trainables/config/schema.py`` and an ``EvalSection`` field of that class or None (a config is
   checked there, a floor below this one, before any evaluation exists); its defaults are what
   ``mjp evaluate`` runs with when a config has none.

Nothing else names the evaluations: it then runs at the end of every training whose config sets
its section (every training, without one; ``at_end``: on rank 0, after the others), is offered and
described by ``mjp evaluate --what``, and its check is part of every pre-flight where it runs. The
modules are imported only when an evaluation runs or is checked: a study's validation reads
``reported_metrics`` without torch.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from mjp import keys
from trainables.config.schema import EvalSection, PEAnalysisSection, PrivacySection, RobustnessSection, TrainConfig
from trainables.evaluation.result import EvaluationResult, PreflightFacts, given


@dataclass(frozen=True)
class Lazy:
    """The function ``module:function``, imported when first called (so reading the registry
    imports no evaluation module, and no torch)."""

    target: str

    def resolve(self) -> Callable[..., Any]:
        module, _, name = self.target.partition(":")
        function: Callable[..., Any] = getattr(importlib.import_module(module), name)
        return function

    def __call__(self, *args: Any) -> Any:
        return self.resolve()(*args)


def _nothing_reported(cfg: TrainConfig) -> set[str]:
    return set()


@dataclass(frozen=True)
class Evaluation:
    """One of the paper's evaluations.

    ``description``: one line for ``mjp evaluate --help``. ``run``: ``(cfg, model, bundle, device,
    title) -> EvaluationResult``. ``section``: the ``eval`` section class that configures it, at
    ``cfg.eval.<field>`` (both None: it always runs; the class's defaults: what ``mjp evaluate``
    runs with when a config has none). ``standalone``: that section as ``mjp evaluate`` runs it,
    where one process has the whole machine (None: as given). ``reported``: the metric keys a study's
    objectives may name. ``check``: ``(cfg, facts) -> None``, raising ``ConfigError`` before
    anything trains (the pre-flight calls it where the evaluation is configured). ``at_end``: run
    by ``final.py`` on rank 0 at the end of a training; False for one that runs elsewhere (shuffle
    runs on every worker, its counts summed across them)."""

    name: str
    description: str
    run: Callable[..., EvaluationResult]
    section: type[BaseModel] | None = None
    field: str | None = None
    standalone: Callable[[Any], Any] | None = None
    reported: Callable[[TrainConfig], set[str]] = _nothing_reported
    check: Callable[[TrainConfig, PreflightFacts], None] | None = None
    at_end: bool = True

    def __post_init__(self) -> None:
        if (self.section is None) != (self.field is None) or (self.field is not None and self.field not in EvalSection.model_fields):
            raise ValueError(f"evaluation {self.name!r}: section and field go together, field a key of EvalSection (got {self.field!r})")

    def configured(self, cfg: TrainConfig) -> bool:
        return self.field is None or getattr(cfg.eval, self.field) is not None


def _shuffle_keys(cfg: TrainConfig) -> set[str]:
    return {keys.VAL_CONSISTENCY, keys.VAL_DIFF_NORM} | {keys.top1_shuffled_key(r) for r in cfg.eval.shuffle_ratios}


def _privacy_keys(cfg: TrainConfig) -> set[str]:
    return {keys.privacy_key(s, m) for s in given(cfg.eval.privacy, "eval.privacy").settings for m in ("mse", "psnr", "ssim", "fft2d")}


def _machine_workers(section: RobustnessSection) -> RobustnessSection:
    """Robustness on a process that has the machine: its corruptions spread over every core."""
    return section if section.workers is not None else section.model_copy(update={"workers": os.cpu_count() or 1})


#: the paper's evaluations, in the order ``mjp evaluate`` lists them and a training runs them.
#: Robustness and PE report keys that depend on the data (ImageNet-1K or not), so objectives may not name them.
EVALUATIONS: dict[str, Evaluation] = {
    e.name: e
    for e in (
        Evaluation(
            "shuffle",
            "consistency, Diff. Norm and top-1 under test-time patch shuffles (Table 3)",
            Lazy("trainables.evaluation.accuracy:shuffle_evaluation"),
            reported=_shuffle_keys,
            check=Lazy("trainables.evaluation.accuracy:shuffle_preflight"),
            at_end=False,
        ),
        Evaluation(
            "robustness",
            "ImageNet-C corruption errors and mCE, ImageNet-A/O/R where given (Table 2)",
            Lazy("trainables.evaluation.robustness:robustness_evaluation"),
            section=RobustnessSection,
            field="robustness",
            standalone=_machine_workers,
            check=Lazy("trainables.evaluation.robustness:robustness_preflight"),
        ),
        Evaluation(
            "pe",
            "what the position embedding learnt: explained variance, position regression, figures (Table 6)",
            Lazy("trainables.evaluation.pe:pe_evaluation"),
            section=PEAnalysisSection,
            field="pe_analysis",
        ),
        Evaluation(
            "privacy",
            "gradient-inversion attacks on the first validation images, scored (Table 5)",
            Lazy("trainables.evaluation.privacy:privacy_evaluation"),
            section=PrivacySection,
            field="privacy",
            reported=_privacy_keys,
            check=Lazy("trainables.evaluation.privacy:privacy_preflight"),
        ),
    )
}


def at_end() -> tuple[str, ...]:
    """The evaluations the end of a training runs on rank 0 (where its config sets them), in order."""
    return tuple(name for name, evaluation in EVALUATIONS.items() if evaluation.at_end)


def check_evaluations(cfg: TrainConfig, facts: PreflightFacts) -> None:
    """Every configured evaluation's pre-flight check, in order (the first refusal raises)."""
    for evaluation in EVALUATIONS.values():
        if evaluation.check is not None and evaluation.configured(cfg):
            evaluation.check(cfg, facts)


def reported_metrics(cfg: TrainConfig) -> set[str]:
    """Every metric key a training of ``cfg`` reports (what a study's objectives may name)."""
    found = set(keys.EPOCH_METRICS)
    for evaluation in EVALUATIONS.values():
        if evaluation.configured(cfg):
            found |= evaluation.reported(cfg)
    return found
