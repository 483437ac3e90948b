"""The privacy settings of the paper's Table 5, for one attack on a set of images.

- ``a``: gradients of ``x``, reconstruction scored against ``x``;
- ``b``: gradients of the jigsaw-shuffled ``x~``, scored against ``x~``;
- ``c``: gradients of ``x~``, scored against ``x`` (what a user actually leaks).

Each image is attacked alone (batch size 1, as APRIL and the paper). ``x~`` is shuffled at
``ratio`` with a seeded generator; MJP models put E_unk at its shuffled slots.
"""

from __future__ import annotations

import copy
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn

from mjp.jigsaw import shuffle_image_patches
from mjp.metrics import model_patch_size, sample_eval_shuffle
from mjp.privacy.april import april_reconstruct, april_requirements, pe_gradient_condition
from mjp.privacy.gradients import infer_label, sample_gradients
from mjp.privacy.inversion import invert_gradients
from mjp.privacy.scores import LPIPS, image_scores, to_unit

Setting = Literal["a", "b", "c"]
Attack = Literal["april", "inversion"]
SETTINGS: tuple[str, ...] = ("a", "b", "c")


def choose_attack(model: nn.Module) -> tuple[Attack, str]:
    """The attack that applies to ``model`` and why: APRIL's analytic one where its first block is
    an ``AprilBlock``, else gradient matching (any model)."""
    why_not = april_requirements(model)
    if why_not is None:
        return "april", "the model has APRIL's block (april_block=True), so the analytic attack applies"
    return "inversion", f"gradient matching works on any model; APRIL's analytic attack does not apply here: {why_not}"


def attack_units(attack: Attack, images: int, inversion_steps: int) -> int:
    """How many times ``attack_images`` calls ``on_progress`` for ``images`` images (one per image
    for APRIL, one per optimisation step for the inversion attack)."""
    return images * (inversion_steps if attack == "inversion" else 1)


@dataclass
class AttackResult:
    setting: str
    attack: str
    reconstructions: torch.Tensor  # [B, C, H, W] in [0, 1]
    targets: torch.Tensor  # [B, C, H, W] in [0, 1]
    scores: dict[str, float]


def attack_images(
    model: nn.Module,
    images: torch.Tensor,
    labels: torch.Tensor,
    setting: Setting,
    *,
    attack: Attack = "april",
    ratio: float = 0.5,
    generator: torch.Generator | None = None,
    dal_weight: float = 0.0,
    inversion_steps: int = 200,
    lpips: LPIPS | None = None,
    client_dtype: torch.dtype = torch.float32,
    on_progress: Callable[[], None] | None = None,
) -> AttackResult:
    """Attack every image of ``images [B, C, H, W]`` (labels ``[B]``) in ``setting``; mean scores
    (and, for the analytic attack, ``cond``: the median condition number of its linear system).

    ``client_dtype``: the precision in which the simulated client computes the gradients it
    shares (float32 as a real client would; float64 shows what the attack can do in principle).
    ``on_progress()``: after each unit of work (``attack_units`` of them), for a caller's progress.
    """
    if setting not in SETTINGS:
        raise ValueError(f"setting={setting!r}; allowed: a, b, c")
    if attack not in ("april", "inversion"):
        raise ValueError(f"attack={attack!r}; allowed: april, inversion")
    client = model if next(model.parameters()).dtype == client_dtype else copy.deepcopy(model).to(client_dtype)
    recons, targets, conditions = [], [], []
    for i in range(images.shape[0]):
        x, y = images[i : i + 1], labels[i : i + 1]
        shuffle = None if setting == "a" else sample_eval_shuffle(model, x, ratio, generator)
        grads = sample_gradients(client, x.to(client_dtype), y, shuffle=shuffle, dal_weight=dal_weight)
        if attack == "april":
            recon = april_reconstruct(client, grads, dal_weight=dal_weight)
            conditions.append(pe_gradient_condition(client, grads, dal_weight=dal_weight))
            if on_progress is not None:
                on_progress()
        else:
            recon = invert_gradients(
                client, grads, infer_label(client, grads), tuple(x.shape), steps=inversion_steps, generator=generator, on_step=on_progress
            ).image.to(x.dtype)
        seen = x if shuffle is None else shuffle_image_patches(x, shuffle.perm, model_patch_size(model))
        target = seen if setting == "b" else x
        recons.append(to_unit(recon, target))
        targets.append(to_unit(target, target))
    recon_all, target_all = torch.cat(recons).to(images.dtype), torch.cat(targets)
    scores = image_scores(recon_all, target_all, lpips=lpips)
    if conditions:
        scores["cond"] = statistics.median(conditions)
    return AttackResult(setting, attack, recon_all, target_all, scores)
