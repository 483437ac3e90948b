"""MJP on timm's ``VisionTransformer``: only ``_pos_embed`` changes (as timm's distilled DeiT does).

``pos_embed`` keeps its name and shape, so timm checkpoints load; E_unk / E_idx / the DAL head
are separate parameters named ``mjp_*``. Covers deit_* and vit_* models, including
``no_embed_class``, ``dynamic_img_size`` and register tokens.
"""

from __future__ import annotations

import torch
from timm.models._manipulate import checkpoint_seq
from timm.models.vision_transformer import VisionTransformer

from mjp.jigsaw import JigsawShuffle, shuffle_tokens
from mjp.models.base import MJPMixin


# forward(x, shuffle) may return an MJPOutput: not timm's signature, on purpose (hence the ignore)
class MJPVisionTransformer(MJPMixin, VisionTransformer):  # type: ignore[misc]
    """timm's ``VisionTransformer`` with MJP: token-space jigsaw after the patch embedding; E_unk at
    shuffled slots; CLS keeps its PE."""

    def mjp_patch_size(self) -> tuple[int, int]:
        return tuple(self.patch_embed.patch_size)

    def mjp_pe_rows(self) -> torch.Tensor | None:
        if self.pos_embed is None:
            return None
        return self.pos_embed[:, 0 if self.no_embed_class else self.num_prefix_tokens :]

    def forward_features(
        self, x: torch.Tensor, attn_mask=None, is_causal: bool = False, *, shuffle: JigsawShuffle | None = None
    ) -> torch.Tensor:
        """``x [B, C, H, W]`` -> tokens ``[B, prefix + N, D]`` after the final norm.

        timm's ``forward_features`` with the shuffle passed down to ``_pos_embed`` as an argument.
        """
        x = self.patch_embed(self._mjp_shuffle_pixels(x, shuffle))
        x = self._pos_embed(x, shuffle)
        x = self.norm_pre(self.patch_drop(x))
        if attn_mask is not None or is_causal:
            for block in self.blocks:
                x = block(x, attn_mask=attn_mask, is_causal=is_causal)
        elif self.grad_checkpointing and not torch.jit.is_scripting():
            x = checkpoint_seq(self.blocks, x)
        else:
            x = self.blocks(x)
        return self.norm(x)

    def _pos_embed(self, x: torch.Tensor, shuffle: JigsawShuffle | None = None) -> torch.Tensor:
        """Patch tokens ``[B, N, D]`` (``[B, H, W, D]`` with ``dynamic_img_size``) -> ``[B, prefix + N, D]``:
        shuffled by ``shuffle``, with the PE ``mjp.pos_embed`` gives each slot, prefix tokens in front."""
        if shuffle is None and not self.mjp_cfg.pe_differs_unshuffled:
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
        prefix_tokens = [t.expand(x.shape[0], -1, -1) for t in (self.cls_token, self.reg_token) if t is not None]
        if prefix_tokens:
            prefix = torch.cat(prefix_tokens, dim=1)
            if self.pos_embed is not None and not self.no_embed_class:
                prefix = prefix + self.pos_embed[:, : self.num_prefix_tokens]
            x = torch.cat([prefix, x], dim=1)
        return self.pos_drop(x)
