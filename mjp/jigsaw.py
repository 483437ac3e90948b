"""Jigsaw shuffle (Algorithm 1, step 4): permute the selected patches among themselves.

A shuffle is a pair ``(mask, perm)``: ``mask [B, N]`` marks the selected positions, ``perm [B, N]``
is a per-sample permutation of ``0..N-1`` that is the identity where the mask is False. The
shuffled token sequence is ``tokens.gather(1, perm[..., None].expand_as(tokens))``: slot ``i``
receives the token that was at ``perm[b, i]``. For a conv patch embedding with kernel == stride,
shuffling tokens after the embedding equals shuffling image patches before it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import torch

from mjp.masking import DEFAULT_ASPECT_RATIO, DEFAULT_MIN_BLOCK, sample_block_masks


@dataclass(frozen=True)
class JigsawShuffle:
    """One batch's shuffle. ``mask``: bool ``[B, N]``; ``perm``: long ``[B, N]``; ``grid``: (H, W);
    ``pixel_order``: SPP's pixel half, long ``[B or 1, N, ph * pw]`` (``pixel_orders``), else None."""

    mask: torch.Tensor
    perm: torch.Tensor
    grid: tuple[int, int]
    pixel_order: torch.Tensor | None = None

    def to(self, device: torch.device | str) -> JigsawShuffle:
        order = self.pixel_order.to(device, non_blocking=True) if self.pixel_order is not None else None
        return JigsawShuffle(self.mask.to(device, non_blocking=True), self.perm.to(device, non_blocking=True), self.grid, order)


@lru_cache(maxsize=32)
def _positions(n: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Sort keys made once per length and device: ``i / n`` and ``1 + i / n``, each ``[1, n]``."""
    position = torch.arange(n, dtype=torch.float32, device=device).div_(n).unsqueeze(0)
    return position, position + 1.0


def jigsaw_permutation(mask: torch.Tensor, *, generator: torch.Generator | None = None) -> torch.Tensor:
    """Uniformly random per-sample permutation of the selected positions.

    Args:
        mask: bool ``[B, N]``, True = may move. Rows may select different numbers of positions.
        generator: randomness; drawn on the generator's device, result on ``mask.device``.

    Returns:
        long ``[B, N]``; ``perm[b, i] == i`` wherever ``mask[b, i]`` is False, and the selected
        positions of row ``b`` are mapped onto themselves in random order. As in the paper and the
        reference code, a selected patch may land back on its own position.
    """
    if mask.dtype != torch.bool or mask.dim() != 2:
        raise ValueError(f"mask must be a bool tensor [B, N], got {mask.dtype} of shape {tuple(mask.shape)}")
    b, n = mask.shape
    gen_device = generator.device if generator is not None else mask.device
    keys = torch.rand(b, n, generator=generator, device=gen_device, dtype=torch.float32).to(mask.device)
    position, after = _positions(n, mask.device)
    # Selected positions first (in index order / in random order), then the rest in index order:
    # pairing the two orders maps selected -> selected at random and the rest to themselves.
    in_order = torch.where(mask, position, after).argsort(dim=1)
    at_random = torch.where(mask, keys, after).argsort(dim=1)
    return torch.empty_like(in_order).scatter_(1, in_order, at_random)


def sample_shuffle(
    batch_size: int,
    grid: tuple[int, int],
    ratio: float,
    *,
    generator: torch.Generator | None = None,
    device: torch.device | str | None = None,
    per_batch: bool = False,
    apply_prob: float = 1.0,
    min_block: int = DEFAULT_MIN_BLOCK,
    aspect_ratio: tuple[float, float] = DEFAULT_ASPECT_RATIO,
) -> JigsawShuffle:
    """Masks and permutations for one batch.

    ``per_batch`` reproduces the reference code (one mask and one permutation for the whole
    batch). ``apply_prob`` < 1 leaves a sample (per-sample mode) or the whole batch (per-batch mode)
    unshuffled with probability ``1 - apply_prob``, without a host sync.
    """
    rows = 1 if per_batch else batch_size
    mask = sample_block_masks(rows, grid, ratio, generator=generator, min_block=min_block, aspect_ratio=aspect_ratio)
    if apply_prob < 1.0:
        gen_device = generator.device if generator is not None else torch.device("cpu")
        keep = torch.rand(rows, 1, generator=generator, device=gen_device, dtype=torch.float32) < apply_prob
        mask = mask & keep
    perm = jigsaw_permutation(mask, generator=generator)
    if per_batch:
        mask, perm = mask.expand(batch_size, -1), perm.expand(batch_size, -1)
    out_device = torch.device(device) if device is not None else mask.device
    return JigsawShuffle(mask, perm, (grid[0], grid[1])).to(out_device)


def shuffle_tokens(tokens: torch.Tensor, perm: torch.Tensor) -> torch.Tensor:
    """Apply a permutation to a token sequence. ``tokens [B, N, D]``, ``perm [B, N]`` -> ``[B, N, D]``."""
    return tokens.gather(1, perm.unsqueeze(-1).expand_as(tokens))


def _pair(patch: int | tuple[int, int]) -> tuple[int, int]:
    """A patch size as ``(ph, pw)``: an int is a square patch."""
    if isinstance(patch, int):
        return patch, patch
    ph, pw = patch
    return ph, pw


def _to_patches(images: torch.Tensor, patch: tuple[int, int]) -> tuple[torch.Tensor, tuple[int, int]]:
    """``[B, C, H, W]`` -> ``[B, N, C, ph, pw]`` (row-major patch order) and the grid."""
    b, c, h, w = images.shape
    ph, pw = patch
    if h % ph or w % pw:
        raise ValueError(f"image size {(h, w)} is not divisible by the patch size {patch}")
    gh, gw = h // ph, w // pw
    patches = images.reshape(b, c, gh, ph, gw, pw).permute(0, 2, 4, 1, 3, 5).reshape(b, gh * gw, c, ph, pw)
    return patches, (gh, gw)


def _from_patches(patches: torch.Tensor, grid: tuple[int, int]) -> torch.Tensor:
    b, _, c, ph, pw = patches.shape
    gh, gw = grid
    return patches.reshape(b, gh, gw, c, ph, pw).permute(0, 3, 1, 4, 2, 5).reshape(b, c, gh * ph, gw * pw)


def patch_grid(image_size: Sequence[int], patch: int | tuple[int, int]) -> tuple[int, int]:
    """Patch grid (H/ph, W/pw) for an image size ``(H, W)``; raises when the size is not divisible."""
    ph, pw = (patch, patch) if isinstance(patch, int) else patch
    h, w = image_size
    if h % ph or w % pw:
        raise ValueError(f"image size {(h, w)} is not divisible by the patch size {(ph, pw)}")
    return h // ph, w // pw


def shuffle_image_patches(images: torch.Tensor, perm: torch.Tensor, patch: int | tuple[int, int]) -> torch.Tensor:
    """Jigsaw in pixel space (models without a token stem, e.g. ResNet).

    ``images [B, C, H, W]``, ``perm [B, N]`` with N = (H/ph)(W/pw) -> shuffled ``[B, C, H, W]``.
    """
    patches, grid = _to_patches(images, _pair(patch))
    if perm.shape != patches.shape[:2]:
        raise ValueError(f"perm of shape {tuple(perm.shape)} does not match the {grid} patch grid")
    moved = patches.gather(1, perm.view(*perm.shape, 1, 1, 1).expand_as(patches))
    return _from_patches(moved, grid)


def pixel_orders(
    mask: torch.Tensor,
    patch: int | tuple[int, int],
    *,
    generator: torch.Generator | None = None,
    shared: bool = False,
) -> torch.Tensor:
    """SPP's pixel orders: a random order of the ``ph * pw`` pixels of each selected patch.

    ``mask [B, N]`` -> long ``[B, N, ph * pw]``; the identity where ``mask`` is False. ``shared``:
    one order for every patch of the batch (the reference code's SPP); else one per (image, patch).
    """
    ph, pw = _pair(patch)
    b, n = mask.shape
    gen_device = generator.device if generator is not None else mask.device
    shape = (1, 1, ph * pw) if shared else (b, n, ph * pw)
    keys = torch.rand(shape, generator=generator, device=gen_device, dtype=torch.float32).to(mask.device)
    return torch.where(mask.unsqueeze(-1), keys.argsort(-1), torch.arange(ph * pw, device=mask.device))


def apply_pixel_order(images: torch.Tensor, order: torch.Tensor, patch: int | tuple[int, int]) -> torch.Tensor:
    """Move the pixels inside each patch (the same order on every channel).

    ``images [B, C, H, W]``, ``order [B, N, ph * pw]`` (``pixel_orders``) -> ``[B, C, H, W]``.
    """
    patches, grid = _to_patches(images, _pair(patch))
    b, n, c, ph, pw = patches.shape
    flat = patches.reshape(b, n, c, ph * pw)
    moved = flat.gather(3, order.unsqueeze(2).expand_as(flat)).reshape(b, n, c, ph, pw)
    return _from_patches(moved, grid)


def shuffle_pixels_within_patches(
    images: torch.Tensor,
    mask: torch.Tensor,
    patch: int | tuple[int, int],
    *,
    generator: torch.Generator | None = None,
    shared: bool = False,
) -> torch.Tensor:
    """SPP's pixel half in one call: ``pixel_orders`` then ``apply_pixel_order``.

    ``images [B, C, H, W]``, ``mask [B, N]`` -> ``[B, C, H, W]``; unselected patches are unchanged.
    """
    return apply_pixel_order(images, pixel_orders(mask, patch, generator=generator, shared=shared), patch)
