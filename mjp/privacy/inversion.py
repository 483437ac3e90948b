"""Gradient-matching attack for any model (Geiping et al.'s "Inverting Gradients"):
optimise an image so that its gradients align with the shared ones (cosine distance) under a
total-variation prior, with Adam, a fixed budget and a seeded start.

The attacker runs the model unshuffled: it does not know the client's jigsaw. A shuffled client's
gradients also hold parameters only the shuffle reaches (E_unk of an UNK model, E_idx of an IDX
model at its shuffled slots); no image fed to the unshuffled model moves them, so the match
leaves them out."""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch
import torch.nn.attention
from torch import nn

from mjp.models.base import MJPMixin


@dataclass
class InversionResult:
    image: torch.Tensor  # [1, C, H, W], model input space
    objective: list[float]  # per step: cosine distance + tv_weight * TV


def total_variation(x: torch.Tensor) -> torch.Tensor:
    """Mean absolute difference of neighbouring pixels: ``[B, C, H, W]`` -> scalar."""
    return (x[..., 1:, :] - x[..., :-1, :]).abs().mean() + (x[..., :, 1:] - x[..., :, :-1]).abs().mean()


def _total(terms: Iterable[torch.Tensor]) -> torch.Tensor:
    """The sum of one or more tensors (``sum`` without its leading ``0 +``, so typed as a tensor)."""
    return functools.reduce(operator.add, terms)


def _forward_loss(model: nn.Module, x: torch.Tensor, label: torch.Tensor) -> torch.Tensor:
    """The attacker's loss on ``x [1, C, H, W]``: the model unshuffled, cross-entropy to ``label [1]``."""
    logits = model(x, shuffle=None) if isinstance(model, MJPMixin) else model(x)
    return nn.functional.cross_entropy(logits, label)


def _reached(model: nn.Module, x: torch.Tensor, label: torch.Tensor, params: dict[str, nn.Parameter]) -> list[str]:
    """The names of ``params`` that the attacker's forward on ``x`` reaches (those it can match)."""
    with torch.enable_grad():
        found = torch.autograd.grad(_forward_loss(model, x, label), list(params.values()), allow_unused=True)
    return [n for n, g in zip(params, found) if g is not None]


def invert_gradients(
    model: nn.Module,
    grads: dict[str, torch.Tensor],
    label: torch.Tensor,
    shape: tuple[int, ...],
    *,
    steps: int = 200,
    lr: float = 0.1,
    tv_weight: float = 0.1,
    generator: torch.Generator | None = None,
    on_step: Callable[[], None] | None = None,
) -> InversionResult:
    """Reconstruct an input of ``shape`` (``[1, C, H, W]``) whose gradients (for ``label``) match ``grads``;
    ``on_step()`` after each of the ``steps`` (a caller's progress)."""
    was_training = model.training
    model.eval()
    params = dict(model.named_parameters())
    shared = [n for n, p in params.items() if p.requires_grad and n in grads and grads[n].abs().sum() > 0]
    x = torch.randn(shape, generator=generator).to(grads[shared[0]].device).requires_grad_(True)
    names = _reached(model, x, label, {n: params[n] for n in shared})
    targets = [grads[n].detach() for n in names]
    target_norm = torch.sqrt(_total((t * t).sum() for t in targets))
    opt = torch.optim.Adam([x], lr=lr)
    sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=[int(steps * f) for f in (0.375, 0.625, 0.875)], gamma=0.1)
    history: list[torch.Tensor] = []  # on the device: no host sync per step
    # double backward: the fused attention kernels have no second derivative on every device
    math_attention = torch.nn.attention.sdpa_kernel([torch.nn.attention.SDPBackend.MATH])
    try:
        math_attention.__enter__()
        for _ in range(steps):
            opt.zero_grad()
            trial = torch.autograd.grad(_forward_loss(model, x, label), [params[n] for n in names], create_graph=True)
            dot = _total((a * b).sum() for a, b in zip(trial, targets))
            norm = torch.sqrt(_total((a * a).sum() for a in trial))
            objective = 1 - dot / (norm * target_norm + 1e-12) + tv_weight * total_variation(x)
            objective.backward()
            assert x.grad is not None  # backward() just filled it
            x.grad.sign_()  # signed gradients, as in the original attack
            opt.step()
            sched.step()
            history.append(objective.detach())
            if on_step is not None:
                on_step()
    finally:
        math_attention.__exit__(None, None, None)
        model.train(was_training)
    # the attack's loss history as numbers: one host sync, after the attack (never in a training step)
    return InversionResult(x.detach(), torch.stack(history).tolist() if history else [])
