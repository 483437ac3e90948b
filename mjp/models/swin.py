"""MJP on timm's ``SwinTransformer``, which has no absolute PE: MJP adds one (``absolute_pos_embed``).

The jigsaw runs in token space on the patch-embedding output (NHWC), before the first stage.
"""

from __future__ import annotations

from typing import cast

import torch
from timm.layers import PatchEmbed, trunc_normal_
from timm.models.swin_transformer import SwinTransformer
from torch import nn

from mjp.config import MJPConfig
from mjp.jigsaw import JigsawShuffle, shuffle_tokens
from mjp.models.base import MJPMixin


# forward(x, shuffle) may return an MJPOutput: not timm's signature, on purpose (hence the ignore)
class MJPSwinTransformer(MJPMixin, SwinTransformer):  # type: ignore[misc]
    """timm's Swin with an added absolute PE ``[1, H * W, C]`` and MJP on it."""

    def _init_mjp(self, cfg: MJPConfig, dim: int, grid: tuple[int, int]) -> None:
        super()._init_mjp(cfg, dim, grid)
        self.absolute_pos_embed = None
        if cfg.pos_embed != "none":
            self.absolute_pos_embed = nn.Parameter(torch.zeros(1, grid[0] * grid[1], dim))
            trunc_normal_(self.absolute_pos_embed, std=0.02)

    def mjp_patch_size(self) -> tuple[int, int]:
        return tuple(cast(PatchEmbed, self.patch_embed).patch_size)  # timm's Swin builds its stem with PatchEmbed

    def mjp_pe_rows(self) -> torch.Tensor | None:
        return self.absolute_pos_embed

    def forward_features(self, x: torch.Tensor, *, shuffle: JigsawShuffle | None = None) -> torch.Tensor:
        """``x [B, C, H, W]`` -> features ``[B, h, w, C']`` (NHWC, after the final norm)."""
        x = self.patch_embed(self._mjp_shuffle_pixels(x, shuffle))
        b, h, w, c = x.shape
        tokens = x.reshape(b, h * w, c)
        if shuffle is not None:
            if tuple(shuffle.grid) != (h, w):
                raise ValueError(f"shuffle grid {shuffle.grid} does not match the model's patch grid {(h, w)}")
            tokens = shuffle_tokens(tokens, shuffle.perm)
        pos = self.mjp_slot_pos((h, w), shuffle)
        if pos is not None:
            tokens = tokens + pos
        x = self.layers(tokens.reshape(b, h, w, c))
        return self.norm(x)
