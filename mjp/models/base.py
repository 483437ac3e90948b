"""What every MJP model shares: its config, the PE at shuffled slots, DAL; the shuffle is an argument.

A family (ViT, Swin, ResNet) mixes ``MJPMixin`` in front of its timm class and says where the
shuffle happens. ``forward(x)`` returns logits ``[B, classes]``, or in training mode
with DAL on an ``MJPOutput(logits, loss_dal)`` so that DDP sees the DAL head's parameters used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple, Protocol

import torch
from timm.layers import resample_abs_pos_embed, trunc_normal_
from torch import nn

from mjp.config import MJPConfig
from mjp.dal import DALHead, dal_loss
from mjp.jigsaw import JigsawShuffle, apply_pixel_order
from mjp.pos_embed import slot_position_embedding


class TimmClassifier(Protocol):
    """What every timm classification model has beyond ``nn.Module`` (and what this code calls)."""

    def forward_features(self, x: torch.Tensor) -> torch.Tensor: ...

    def forward_head(self, x: torch.Tensor, pre_logits: bool = False) -> torch.Tensor: ...

    def get_classifier(self) -> nn.Module: ...


class MJPOutput(NamedTuple):
    """Training-mode output with DAL on: ``logits [B, classes]``, ``loss_dal`` (unweighted scalar)."""

    logits: torch.Tensor
    loss_dal: torch.Tensor


class MJPMixin:
    """Mixed in before a timm model class; call ``_init_mjp`` after the timm model is built."""

    mjp_cfg: MJPConfig
    mjp_grid: tuple[int, int]

    if TYPE_CHECKING:
        # what the timm model class mixed in after this one (an nn.Module) and the family provide
        training: bool

        def forward_features(self, x: torch.Tensor, *, shuffle: JigsawShuffle | None = None) -> torch.Tensor: ...

        def forward_head(self, x: torch.Tensor, pre_logits: bool = False) -> torch.Tensor: ...

    def _init_mjp(self, cfg: MJPConfig, dim: int, grid: tuple[int, int]) -> None:
        self.mjp_cfg = cfg
        self.mjp_grid = (grid[0], grid[1])
        if cfg.pos_embed == "unk":
            self.mjp_unk_embed = nn.Parameter(torch.zeros(1, 1, dim))
            trunc_normal_(self.mjp_unk_embed, std=cfg.unk_init_std)
        if cfg.pos_embed == "idx":
            self.mjp_idx_embed = nn.Parameter(torch.zeros(1, grid[0] * grid[1], dim))
            trunc_normal_(self.mjp_idx_embed, std=cfg.unk_init_std)
        if cfg.dal != "none":
            self.mjp_dal_head = DALHead(cfg.dal, dim, positions=grid[0] * grid[1], pca_mode=cfg.dal_pca, seed=cfg.seed)

    # --- the shuffle ------------------------------------------------------------------------
    def mjp_patch_size(self) -> tuple[int, int]:
        raise NotImplementedError

    def _mjp_shuffle_pixels(self, images: torch.Tensor, shuffle: JigsawShuffle | None) -> torch.Tensor:
        """SPP's pixel half, before the patch embedding: the shuffle's pixel orders (identity for
        other variants, and for shuffles without pixel orders, such as the test-time ones)."""
        if shuffle is None or shuffle.pixel_order is None or self.mjp_cfg.shuffle != "patches_and_pixels":
            return images
        return apply_pixel_order(images, shuffle.pixel_order, self.mjp_patch_size())

    # --- position embeddings ----------------------------------------------------------------
    def mjp_pe_rows(self) -> torch.Tensor | None:
        """The patch rows of the absolute PE on the native grid, ``[1, H * W, D]`` (None without PE)."""
        raise NotImplementedError

    def _mjp_rows_for(self, rows: torch.Tensor, grid: tuple[int, int]) -> torch.Tensor:
        if tuple(grid) == self.mjp_grid:
            return rows
        return resample_abs_pos_embed(rows, new_size=grid, old_size=self.mjp_grid, num_prefix_tokens=0)

    def mjp_slot_pos(self, grid: tuple[int, int], shuffle: JigsawShuffle | None) -> torch.Tensor | None:
        """PE added to each patch slot: ``[1 or B, H * W, D]`` (``mjp.pos_embed``)."""
        rows = self.mjp_pe_rows()
        if rows is None:
            return None
        cfg = self.mjp_cfg
        return slot_position_embedding(
            self._mjp_rows_for(rows, grid),
            shuffle.mask if shuffle is not None else None,
            kind=cfg.pos_embed,
            unk=getattr(self, "mjp_unk_embed", None),
            idx=self._mjp_rows_for(self.mjp_idx_embed, grid) if cfg.pos_embed == "idx" else None,
            idx_mode=cfg.idx_mode,
        )

    def mjp_dal_loss(self, shuffle: JigsawShuffle | None) -> torch.Tensor:
        """DAL on the native-grid PE rows; rows shuffled in this batch are left out."""
        mask = shuffle.mask if shuffle is not None and shuffle.grid == self.mjp_grid else None
        rows = self.mjp_pe_rows()
        if rows is None:
            raise ValueError(f"dal={self.mjp_cfg.dal!r} regresses positions from the PE, but {type(self).__name__} has none")
        return dal_loss(self.mjp_dal_head, rows[0], self.mjp_grid, mask)

    def no_weight_decay(self) -> set[str]:
        timm_no_weight_decay = getattr(super(), "no_weight_decay", None)
        base = timm_no_weight_decay() if timm_no_weight_decay is not None else set()
        return set(base) | {"mjp_unk_embed", "mjp_idx_embed", "pos_embed", "absolute_pos_embed"}

    # --- forward ----------------------------------------------------------------------------
    def forward(self, x: torch.Tensor, shuffle: JigsawShuffle | None = None) -> torch.Tensor | MJPOutput:
        """``x [B, C, H, W]`` -> logits ``[B, classes]`` (``MJPOutput`` in training with DAL).

        ``shuffle``: the batch's jigsaw (``mjp.algorithm.MJPAlgorithm.shuffle`` in training,
        ``mjp.metrics`` at evaluation), or None. The model holds no random state: the same
        inputs and parameters give the same output, and a compiled model never traces a draw.
        """
        logits = self.forward_head(self.forward_features(x, shuffle=shuffle))
        if self.training and self.mjp_cfg.dal != "none":
            return MJPOutput(logits, self.mjp_dal_loss(shuffle))
        return logits
