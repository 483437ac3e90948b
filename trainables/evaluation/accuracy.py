"""Top-1 on the validation set and under shuffled patches (Table 3's shuffle ratios, the consistency
and Diff. Norm of the paper), reduced across workers with the ``reduce`` the loop passes."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch
from torch import nn

from mjp import keys
from mjp.metrics import consistency_per_image, shuffled_correct
from trainables.config.schema import TrainConfig
from trainables.config.seeds import derive_seed
from trainables.data.datasets import DatasetBundle
from trainables.evaluation.result import EvaluationResult, PreflightFacts, eval_seed

Reduce = Callable[[torch.Tensor], torch.Tensor]
#: the artifact of top-1 against the shuffle ratio
SHUFFLE_FIGURE = "top1_vs_shuffle_ratio.png"


@torch.no_grad()
def evaluate(model: nn.Module, loader: Iterable, device: torch.device, reduce: Reduce | None = None) -> dict[str, float]:
    """``val/loss``, ``val/top1``, ``val/top5`` over the loader (summed across workers by ``reduce``).
    ``model``: the module itself, not a DDP or compile wrapper (``train.state.unwrap``)."""
    raw = model
    raw.eval()
    sums = torch.zeros(4, device=device)  # loss, top1, top5, n
    for x, y in loader:
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        logits = raw(x).float()
        top = logits.topk(min(5, logits.shape[-1]), dim=-1).indices
        sums += torch.stack(
            [
                nn.functional.cross_entropy(logits, y, reduction="sum"),
                (top[:, 0] == y).sum(),
                (top == y[:, None]).any(-1).sum(),
                torch.tensor(float(len(y)), device=device),
            ]
        )
    if reduce is not None:
        sums = reduce(sums)
    loss, top1, top5, n = sums.tolist()
    n = max(n, 1.0)
    return {keys.VAL_LOSS: loss / n, keys.VAL_TOP1: top1 / n, keys.VAL_TOP5: top5 / n}


@torch.no_grad()
def evaluate_shuffles(
    cfg: TrainConfig, model: nn.Module, loader: Iterable, device: torch.device, rank: int = 0, reduce: Reduce | None = None
) -> dict[str, float]:
    """Paper protocol: ``val/consistency``, ``val/diff_norm`` at ``eval.consistency_ratio`` and
    ``val/top1_shuffled_<r>`` for every ``eval.shuffle_ratios``; seeded per worker. ``model``: the
    module itself, not a DDP or compile wrapper."""
    raw = model
    raw.eval()
    gen = torch.Generator(device=device).manual_seed(derive_seed(eval_seed(cfg), "eval", rank))  # draws on the device
    ratios = cfg.eval.shuffle_ratios
    sums = torch.zeros(3 + len(ratios), dtype=torch.float64, device=device)  # agree, diff, n, correct per ratio
    for x, y in loader:
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        agree, diff = consistency_per_image(raw, x, cfg.eval.consistency_ratio, generator=gen)
        correct = [shuffled_correct(raw, x, y, r, generator=gen).sum() for r in ratios]
        sums += torch.stack([agree.sum(), diff.sum(), torch.tensor(len(y), device=device), *correct]).double()
    if reduce is not None:
        sums = reduce(sums)
    sums = sums.cpu()  # the one host sync of the evaluation
    n = max(sums[2].item(), 1.0)
    out = {keys.VAL_CONSISTENCY: sums[0].item() / n, keys.VAL_DIFF_NORM: sums[1].item() / n}
    out.update({keys.top1_shuffled_key(r): sums[3 + i].item() / n for i, r in enumerate(ratios)})
    return out


def shuffle_evaluation(cfg: TrainConfig, model: nn.Module, bundle: DatasetBundle, device: torch.device, title: str) -> EvaluationResult:
    """``mjp evaluate``'s ``shuffle``: top-1 and the shuffle protocol on the validation set, on one
    process, with the figure of top-1 against the shuffle ratio."""
    from torch.utils.data import DataLoader

    from trainables.evaluation.figures import shuffle_accuracy_figure

    loader = DataLoader(bundle.val, batch_size=cfg.data.batch_size, shuffle=False, num_workers=cfg.data.loader_workers)
    metrics = {**evaluate(model, loader, device), **evaluate_shuffles(cfg, model, loader, device)}
    return EvaluationResult(metrics, [(shuffle_accuracy_figure(metrics, cfg.eval.shuffle_ratios, title), SHUFFLE_FIGURE)])


def shuffle_preflight(cfg: TrainConfig, facts: PreflightFacts) -> None:
    """``eval.consistency_ratio`` and every ``eval.shuffle_ratios`` select patches on the model's grid."""
    facts.check_ratio("eval.consistency_ratio", cfg.eval.consistency_ratio)
    for r in cfg.eval.shuffle_ratios:
        facts.check_ratio("eval.shuffle_ratios", r)
