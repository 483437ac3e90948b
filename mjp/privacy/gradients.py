"""What a federated client would share: one sample's gradients, by parameter name."""

from __future__ import annotations

from typing import cast

import torch
from torch import nn

from mjp.jigsaw import JigsawShuffle
from mjp.models.base import MJPMixin, TimmClassifier


def sample_gradients(
    model: nn.Module,
    image: torch.Tensor,
    label: torch.Tensor,
    *,
    shuffle: JigsawShuffle | None = None,
    dal_weight: float = 0.0,
) -> dict[str, torch.Tensor]:
    """Gradients of one sample's loss. ``image [1, C, H, W]``, ``label [1]`` -> {name: grad}.

    The model runs in eval mode (no dropout, no random shuffle); ``shuffle`` applies a given jigsaw
    (with E_unk at its slots for UNK models); ``dal_weight`` adds the DAL loss as in training.
    """
    was_training = model.training
    model.eval()
    try:
        params = {n: p for n, p in model.named_parameters() if p.requires_grad}
        with torch.enable_grad():
            logits = model(image, shuffle=shuffle) if isinstance(model, MJPMixin) else model(image)
            loss = nn.functional.cross_entropy(logits, label)
            if dal_weight and isinstance(model, MJPMixin) and hasattr(model, "mjp_dal_head"):
                loss = loss + dal_weight * model.mjp_dal_loss(shuffle)
            grads = torch.autograd.grad(loss, list(params.values()), allow_unused=True)
        return {n: (g if g is not None else torch.zeros_like(p)).detach() for (n, p), g in zip(params.items(), grads)}
    finally:
        model.train(was_training)


def infer_label(model: nn.Module, grads: dict[str, torch.Tensor]) -> torch.Tensor:
    """The label of a single sample from the classifier bias gradient (softmax - one-hot: the only
    negative entry), as iDLG does. Returns ``[1]``."""
    head = cast(TimmClassifier, model).get_classifier()
    name = next(n for n, p in model.named_parameters() if p is head.bias)
    return grads[name].argmin().reshape(1)
