"""MJP on timm's ``VisionTransformer``: only ``_pos_embed`` changes (as timm's distilled DeiT does).

``pos_embed`` keeps its name and shape, so timm checkpoints load; E_unk / E_idx / the DAL head
are separate parameters named ``mjp_*``. Covers deit_* and vit_* models, including
``no_embed_class``, ``dynamic_img_size`` and register tokens.
"""

from __future__ import annotations

import torch
from timm.models.vision_transformer import VisionTransformer

from mjp.jigsaw import JigsawShuffle, shuffle_tokens
from mjp.models.base import MJPMixin


class MJPViTMixin(MJPMixin):
    """Token-space jigsaw after the patch embedding; E_unk at shuffled slots; CLS keeps its PE."""

    _mjp_active_shuffle: JigsawShuffle | None = None

    def mjp_patch_size(self) -> tuple[int, int]:
        return tuple(self.patch_embed.patch_size)

    def mjp_pe_rows(self) -> torch.Tensor | None:
        if self.pos_embed is None:
            return None
        return self.pos_embed[:, 0 if self.no_embed_class else self.num_prefix_tokens :]

    def forward_features(self, x: torch.Tensor, attn_mask=None, is_causal: bool = False, *, shuffle: JigsawShuffle | None = None) -> torch.Tensor:
        """``x [B, C, H, W]`` -> tokens ``[B, prefix + N, D]`` after the final norm."""
        x = self._mjp_shuffle_pixels(x, shuffle)
        self._mjp_active_shuffle = shuffle
        try:
            return super().forward_features(x, attn_mask=attn_mask, is_causal=is_causal)
        finally:
            self._mjp_active_shuffle = None

    def _pos_embed(self, x: torch.Tensor) -> torch.Tensor:
        shuffle = self._mjp_active_shuffle
        if shuffle is None:
            return super()._pos_embed(x)  # bit-for-bit timm
        if x.dim() == 4:  # dynamic_img_size: [B, H, W, D]
            grid = (x.shape[1], x.shape[2])
            x = x.reshape(x.shape[0], -1, x.shape[-1])
        else:
            grid = tuple(self.patch_embed.grid_size)
        if shuffle is not None:
            if tuple(shuffle.grid) != grid:
                raise ValueError(f"shuffle grid {shuffle.grid} does not match the model's patch grid {grid}")
            x = shuffle_tokens(x, shuffle.perm)
        pos = self.mjp_slot_pos(grid, shuffle)
        if pos is not None:
            x = x + pos
        prefix = [t.expand(x.shape[0], -1, -1) for t in (self.cls_token, self.reg_token) if t is not None]
        if prefix:
            prefix = torch.cat(prefix, dim=1)
            if self.pos_embed is not None and not self.no_embed_class:
                prefix = prefix + self.pos_embed[:, : self.num_prefix_tokens]
            x = torch.cat([prefix, x], dim=1)
        return self.pos_drop(x)


class MJPVisionTransformer(MJPViTMixin, VisionTransformer):
    """timm's ``VisionTransformer`` with MJP."""
