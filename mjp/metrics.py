"""The paper's shuffle metrics (keys are in ``mjp.keys``).

- Diff. Norm (Eq. 6): L2 distance between the pre-head features (post final norm, pooled CLS for
  ViTs) of ``x`` and its jigsaw-shuffled ``x~``, averaged over images.
- Consistency (Eq. 7): fraction of images whose argmax prediction is the same for ``x`` and ``x~``.
- Top-1 under a test-time shuffle (Fig. 3): accuracy on ``x~``.

MJP models receive the shuffle itself (E_unk at shuffled slots, as the reference evaluation);
plain timm models get the image patches shuffled in pixel space (the same thing for a patch embed).
Accuracies and consistency are fractions in [0, 1].
"""

from __future__ import annotations

from typing import cast

import torch
from torch import nn

from mjp.jigsaw import JigsawShuffle, patch_grid, sample_shuffle, shuffle_image_patches
from mjp.keys import CONSISTENCY_RATIO
from mjp.models.base import MJPMixin, TimmClassifier


def model_patch_size(model: nn.Module, default: int = 16) -> tuple[int, int]:
    """Patch size the jigsaw uses for ``model`` (its patch embedding's, else ``default``)."""
    if isinstance(model, MJPMixin):
        return model.mjp_patch_size()
    patch_embed = getattr(model, "patch_embed", None)
    if patch_embed is not None:
        return tuple(patch_embed.patch_size)
    return (default, default)


def sample_eval_shuffle(model: nn.Module, images: torch.Tensor, ratio: float, generator: torch.Generator | None) -> JigsawShuffle:
    """A per-sample test-time shuffle of ``images [B, C, H, W]`` at ``ratio``."""
    grid = patch_grid(tuple(images.shape[-2:]), model_patch_size(model))
    return sample_shuffle(images.shape[0], grid, ratio, generator=generator, device=images.device)


def pre_logits(model: nn.Module, images: torch.Tensor, shuffle: JigsawShuffle | None = None) -> torch.Tensor:
    """Features right before the classifier: ``[B, C, H, W]`` -> ``[B, D]``."""
    timm_model = cast(TimmClassifier, model)
    if isinstance(model, MJPMixin):
        feats = model.forward_features(images, shuffle=shuffle)
    else:
        if shuffle is not None:
            images = shuffle_image_patches(images, shuffle.perm, model_patch_size(model))
        feats = timm_model.forward_features(images)
    return timm_model.forward_head(feats, pre_logits=True)


@torch.no_grad()
def consistency_per_image(
    model: nn.Module, images: torch.Tensor, ratio: float = CONSISTENCY_RATIO, *, generator: torch.Generator | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per image, on the model's device: argmax agreement of ``x`` and ``x~`` (bool ``[B]``) and the
    L2 distance of their pre-head features (float ``[B]``). Call in eval mode."""
    shuffle = sample_eval_shuffle(model, images, ratio, generator)
    clean, mixed = pre_logits(model, images), pre_logits(model, images, shuffle)
    head = cast(TimmClassifier, model).get_classifier()
    return head(clean).argmax(-1) == head(mixed).argmax(-1), (clean.float() - mixed.float()).norm(dim=-1)


def consistency(
    model: nn.Module, images: torch.Tensor, ratio: float = CONSISTENCY_RATIO, *, generator: torch.Generator | None = None
) -> dict[str, float]:
    """Consistency and Diff. Norm of ``model`` on ``images [B, C, H, W]`` under a shuffle at ``ratio``.

    Returns ``{"consistency": fraction in [0, 1], "diff_norm": mean L2 distance}`` (this batch's means).
    The model is evaluated in eval mode and restored to its previous mode.
    """
    was_training = model.training
    model.eval()
    try:
        agree, diff = consistency_per_image(model, images, ratio, generator=generator)
        means = torch.stack([agree.float().mean(), diff.float().mean()]).tolist()  # one host sync
        return {"consistency": means[0], "diff_norm": means[1]}
    finally:
        model.train(was_training)


@torch.no_grad()
def shuffled_correct(
    model: nn.Module, images: torch.Tensor, labels: torch.Tensor, ratio: float, *, generator: torch.Generator | None = None
) -> torch.Tensor:
    """Correct top-1 predictions under a test-time shuffle at ``ratio``: bool ``[B]`` (eval mode)."""
    shuffle = sample_eval_shuffle(model, images, ratio, generator) if ratio > 0 else None
    logits = cast(TimmClassifier, model).get_classifier()(pre_logits(model, images, shuffle))
    return logits.argmax(-1) == labels


def top1_under_shuffle(
    model: nn.Module, images: torch.Tensor, labels: torch.Tensor, ratio: float, *, generator: torch.Generator | None = None
) -> float:
    """Top-1 accuracy (fraction) of ``model`` on ``images`` shuffled at ``ratio`` (Fig. 3)."""
    was_training = model.training
    model.eval()
    try:
        # evaluation, never the training step: one host sync per call, for the fraction it returns
        return shuffled_correct(model, images, labels, ratio, generator=generator).float().mean().item()
    finally:
        model.train(was_training)
