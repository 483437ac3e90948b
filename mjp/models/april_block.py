"""The APRIL block: a first transformer block through which Eq. 1 of the attack holds exactly.

APRIL's closed form needs the input embedding ``z0`` to reach the loss only through the first
attention's Q, K, V projections: then ``sum_i W_i^T dL/dW_i = (dL/dz0)^T z0``. A standard
pre-norm block breaks that twice: the LayerNorm before attention is not linear in ``z0``, and the
skip connection around attention adds ``dL/dz1`` to ``dL/dz0``. ``AprilBlock`` drops both for the
attention half (the MLP half keeps its norm and residual). Models built with
``create_model(..., april_block=True)`` train normally and are attackable analytically
(``mjp.privacy.april_reconstruct``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import nn

if TYPE_CHECKING:
    from timm.models.vision_transformer import Block


class AprilBlock(nn.Module):
    """``x [B, T, D]`` -> ``attn(x)`` then the usual residual MLP: ``[B, T, D]``."""

    def __init__(self, block: Block):
        super().__init__()
        self.attn = block.attn
        self.ls1 = block.ls1
        self.norm2, self.mlp, self.ls2, self.drop_path2 = block.norm2, block.mlp, block.ls2, block.drop_path2

    def forward(self, x: torch.Tensor, attn_mask: torch.Tensor | None = None) -> torch.Tensor:
        x = self.ls1(self.attn(x) if attn_mask is None else self.attn(x, attn_mask=attn_mask))
        return x + self.drop_path2(self.ls2(self.mlp(self.norm2(x))))


def use_april_block(model: nn.Module) -> nn.Module:
    """Replace a timm ViT's first block with an ``AprilBlock`` (in place); returns the model."""
    blocks = getattr(model, "blocks", None)
    if blocks is None or not hasattr(blocks[0], "attn") or not hasattr(blocks[0].attn, "qkv"):
        raise ValueError(f"april_block=True needs a timm ViT with blocks[0].attn.qkv; {type(model).__name__} has none")
    blocks[0] = AprilBlock(blocks[0])
    return model
