"""The paper's evaluations run together on one process: those a config asks for (at the end of a
training, on rank 0) or those a user names (``mjp evaluate``, each configured with its defaults
where the config sets none)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from trainables.evaluation.registry import EVALUATIONS
from trainables.evaluation.result import EvaluationResult, run_title

if TYPE_CHECKING:
    import torch

    from trainables.config.schema import TrainConfig
    from trainables.data.datasets import DatasetBundle


def with_sections(cfg: TrainConfig, names: Iterable[str]) -> TrainConfig:
    """``cfg`` with every named evaluation configured (its section's defaults where the config has
    none), each section as its ``standalone`` adapts it to a process that has the machine."""
    update: dict[str, Any] = {}
    for name in names:
        evaluation = EVALUATIONS[name]
        if evaluation.section is None or evaluation.field is None:
            continue
        given = getattr(cfg.eval, evaluation.field)
        section = evaluation.section() if given is None else given
        if evaluation.standalone is not None:
            section = evaluation.standalone(section)
        if section is not given:
            update[evaluation.field] = section
    return cfg.model_copy(update={"eval": cfg.eval.model_copy(update=update)}) if update else cfg


def run_evaluations(
    cfg: TrainConfig, model: torch.nn.Module, bundle: DatasetBundle, device: torch.device, names: Iterable[str]
) -> dict[str, EvaluationResult]:
    """The named evaluations that ``cfg.eval`` configures, in order, on this process."""
    title = run_title(cfg)
    return {name: EVALUATIONS[name].run(cfg, model, bundle, device, title) for name in names if EVALUATIONS[name].configured(cfg)}
