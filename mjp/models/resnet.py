"""MJP on timm's ``ResNet``: the jigsaw only, in pixel space (the paper's ResNet-50 + MJP; no PE)."""

from __future__ import annotations

import torch
from timm.models.resnet import ResNet

from mjp.jigsaw import JigsawShuffle, shuffle_image_patches
from mjp.models.base import MJPMixin


class MJPResNet(MJPMixin, ResNet):  # type: ignore[misc]  # forward(x, shuffle) may return an MJPOutput: not timm's signature, on purpose
    """Selected ``patch_size`` x ``patch_size`` image patches are shuffled before the stem."""

    def mjp_patch_size(self) -> tuple[int, int]:
        p = self.mjp_cfg.patch_size or 16
        return (p, p)

    def mjp_pe_rows(self) -> torch.Tensor | None:
        return None

    def forward_features(self, x: torch.Tensor, *, shuffle: JigsawShuffle | None = None) -> torch.Tensor:
        """``x [B, C, H, W]`` -> feature map ``[B, C', h, w]``."""
        if shuffle is not None:
            x = shuffle_image_patches(self._mjp_shuffle_pixels(x, shuffle), shuffle.perm, self.mjp_patch_size())
        return super().forward_features(x)
