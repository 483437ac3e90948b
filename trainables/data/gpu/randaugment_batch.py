"""One RandAugment layer on a whole batch, in the same ops with the same shapes whatever each
sample drew (``data.decode: gpu``): no subset is indexed, no shape depends on the draws and
nothing is read back to the host, so the augmentation after the crop can be captured once (a CUDA
graph or one compiled region) and replayed.

timm's 15 ops fall in three kinds. Each kind is computed for every image of the batch and the
result a sample keeps is chosen per sample with ``torch.where``:

- a lookup table per image and channel (uint8 ``[B, 3, 256]``, applied by one gather):
  AutoContrast, Equalize, Invert, Posterize, Solarize, SolarizeAdd, Contrast and Brightness, and
  the identity for a sample that applies no op;
- a blend with a per-pixel degenerate image: Color (the luma image) and Sharpness (PIL's SMOOTH);
- one bicubic affine warp with a matrix per sample: Rotate, ShearX/Y and TranslateX/YRel.

Each kind computes, per sample, what ``randaugment.apply_op`` computes for that op, pixel for
pixel (``tests/trainables/data/gpu/test_randaugment_batch.py`` checks every op against it); which
op a sample applies, and with what argument, is ``augment.draw_sample``'s draw, unchanged.
"""

from __future__ import annotations

import torch

from trainables.data.gpu.randaugment import OPS, affine_warp, blend, device_affine_matrices, luma, smooth

#: the ops of each kind (timm's names, ``randaugment.OPS``)
LOOKUP_OPS = (
    "AutoContrast",
    "Equalize",
    "Invert",
    "PosterizeIncreasing",
    "SolarizeIncreasing",
    "SolarizeAdd",
    "ContrastIncreasing",
    "BrightnessIncreasing",
)
BLEND_OPS = ("ColorIncreasing", "SharpnessIncreasing")
AFFINE_OPS = ("Rotate", "ShearX", "ShearY", "TranslateXRel", "TranslateYRel")
#: the op index of a sample that applies no op in a layer
NO_OP = -1


def _drew(chosen: torch.Tensor, names: tuple[str, ...]) -> torch.Tensor:
    """bool ``[B]``: which samples drew one of ``names`` (``chosen``: bool ``[B, len(OPS)]``, one-hot)."""
    hit = chosen[:, OPS.index(names[0])]
    for name in names[1:]:
        hit = hit | chosen[:, OPS.index(name)]
    return hit


def _equalize_table(hist: torch.Tensor, pixels: int) -> torch.Tensor:
    """torchvision's (PIL's) equalize as a table: int32 histograms ``[B, 3, 256]`` -> uint8 ``[B, 3, 256]``;
    the identity where a channel has a single value."""
    cum = hist.cumsum(-1)
    top = hist.gather(-1, cum.argmax(-1, keepdim=True))  # the count of the channel's largest value
    step = (pixels - top).div(255, rounding_mode="floor")
    table = ((cum[..., :-1] + step // 2).div(step.clamp(min=1), rounding_mode="floor")).clamp(0, 255).to(torch.uint8)
    table = torch.cat([torch.zeros_like(table[..., :1]), table], -1)
    identity = torch.arange(256, device=hist.device).to(torch.uint8).expand_as(table)
    return torch.where(step != 0, table, identity)


def _autocontrast_table(x: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """torchvision's autocontrast as a table: uint8 ``[B, 3, S, S]`` -> uint8 ``[B, 3, 256]``."""
    low, high = x.amin((-2, -1)).float()[..., None], x.amax((-2, -1)).float()[..., None]
    flat = high == low
    inv_scale = torch.where(flat, 1.0, (high - low) * (1.0 / 255))
    return ((values - torch.where(flat, 0.0, low)) / inv_scale).clamp(0, 255).to(torch.uint8)


def _lookup_tables(x: torch.Tensor, chosen: torch.Tensor, arg: torch.Tensor, hist: torch.Tensor) -> torch.Tensor:
    """uint8 ``[B, 3, 256]``: each sample's table (the identity unless it drew a lookup op)."""
    n, channels = x.shape[:2]
    ints = torch.arange(256, device=x.device, dtype=torch.int32).expand(n, channels, 256)
    values = ints.float()
    per_sample = arg.float().view(-1, 1, 1)  # what apply_op reads: the argument in float32
    bits = per_sample.to(torch.int32)
    posterize_mask = torch.bitwise_left_shift(torch.full_like(bits, 0xFF), (8 - bits).clamp(min=0)) & 0xFF
    luma_mean = (luma(x).float().mean(dim=(1, 2, 3)) + 0.5).floor().view(-1, 1, 1)
    tables = {
        "AutoContrast": _autocontrast_table(x, values),
        "Equalize": _equalize_table(hist, x.shape[-2] * x.shape[-1]),
        "Invert": 255 - ints,
        "PosterizeIncreasing": torch.where(bits >= 8, ints, ints & posterize_mask),
        "SolarizeIncreasing": torch.where(ints < per_sample, ints, 255 - ints),
        "SolarizeAdd": torch.where(ints < 128, (ints + per_sample.int()).clamp(max=255), ints),
        "ContrastIncreasing": blend(luma_mean.expand_as(values)[:, :, None], values[:, :, None], per_sample.view(-1))[:, :, 0],
        "BrightnessIncreasing": blend(torch.zeros_like(values)[:, :, None], values[:, :, None], per_sample.view(-1))[:, :, 0],
    }
    out = ints.to(torch.uint8)
    for name, table in tables.items():
        out = torch.where(_drew(chosen, (name,)).view(-1, 1, 1), table.to(torch.uint8), out)
    return out


def rand_augment_layer(x: torch.Tensor, op: torch.Tensor, arg: torch.Tensor, fill: torch.Tensor) -> torch.Tensor:
    """One RandAugment layer: uint8 ``[B, 3, S, S]`` -> uint8 ``[B, 3, S, S]``; sample i applies
    ``OPS[op[i]]`` with argument ``arg[i]`` (``op``: int64 ``[B]``, ``NO_OP`` for none; ``arg``:
    float64 ``[B]``; ``fill``: float ``[3]``, the affine ops' fill colour), all on ``x``'s device."""
    n, channels, height, width = x.shape
    chosen = op[:, None] == torch.arange(len(OPS), device=x.device)  # [B, 15]; all False for NO_OP
    base = (torch.arange(n * channels, device=x.device, dtype=torch.int32) * 256).view(n, channels, 1, 1)
    index = (x.int() + base).view(-1)  # each pixel's entry in the flattened [B, 3, 256] tables
    hist = torch.zeros(n * channels * 256, device=x.device, dtype=torch.int32)
    hist = hist.index_add_(0, index, torch.ones_like(index)).view(n, channels, 256)
    looked_up = _lookup_tables(x, chosen, arg, hist).view(-1).index_select(0, index).view_as(x)

    color = chosen[:, OPS.index("ColorIncreasing"), None, None, None]
    degenerate = torch.where(color, luma(x).float().expand_as(x), smooth(x).float())
    blended = blend(degenerate, x, arg.float())

    matrices = torch.tensor([1.0, 0.0, 0.0, 0.0, 1.0, 0.0], device=x.device, dtype=torch.float64).expand(n, 6)
    for name in AFFINE_OPS:
        matrices = torch.where(chosen[:, OPS.index(name), None], device_affine_matrices(name, arg, height, width), matrices)
    warped = affine_warp(x, matrices, fill)

    out = torch.where(_drew(chosen, BLEND_OPS).view(-1, 1, 1, 1), blended, looked_up)
    return torch.where(_drew(chosen, AFFINE_OPS).view(-1, 1, 1, 1), warped, out)
