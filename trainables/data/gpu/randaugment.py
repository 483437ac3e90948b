"""timm's RandAugment ops (``rand-m9-mstd0.5-inc1``, DeiT's) on batches of uint8 image tensors,
on whatever device they live (CUDA for ``data.decode: gpu``, the CPU in tests).

Each op takes ``x`` uint8 ``[n, 3, S, S]`` and one argument per sample (``args``: float ``[n]`` on
``x``'s device, what timm's level function returned for that sample's magnitude and sign): the
reference, op by op, that ``randaugment_batch`` (a whole batch through every op kind, in fixed
shapes) equals pixel for pixel. The ops follow timm's PIL ones (``timm.data.auto_augment``):
same levels, same fill colour, PIL's luma weights, blend rounding and affine pixel-centre
convention; interpolation is torch's bicubic (a = -0.75; PIL's is -0.5), so geometric ops differ from PIL's by a few grey levels at edges.
"""

from __future__ import annotations

import math

import torch
import torchvision.transforms.v2.functional as TF

#: timm's ``_RAND_INCREASING_TRANSFORMS``, in its order (the op index a sample draws)
OPS: tuple[str, ...] = (
    "AutoContrast",
    "Equalize",
    "Invert",
    "Rotate",
    "PosterizeIncreasing",
    "SolarizeIncreasing",
    "SolarizeAdd",
    "ColorIncreasing",
    "ContrastIncreasing",
    "BrightnessIncreasing",
    "SharpnessIncreasing",
    "ShearX",
    "ShearY",
    "TranslateXRel",
    "TranslateYRel",
)
#: ops whose level timm negates with probability 1/2 (one ``random()`` draw after the magnitude)
SIGNED = frozenset(
    {
        "Rotate",
        "ColorIncreasing",
        "ContrastIncreasing",
        "BrightnessIncreasing",
        "SharpnessIncreasing",
        "ShearX",
        "ShearY",
        "TranslateXRel",
        "TranslateYRel",
    }
)
TRANSLATE_PCT = 0.45


def host_values(values: object, device: torch.device, dtype: torch.dtype | None = None) -> torch.Tensor:
    """Small host-side values (per-sample arguments, indices) as a tensor on ``device``. On CUDA they
    go through pinned memory, non-blocking: a copy from pageable memory would make the host wait
    for every kernel queued before it, and so stall the input pipeline behind the training step."""
    t = values if isinstance(values, torch.Tensor) else torch.tensor(values, dtype=dtype)
    if dtype is not None:
        t = t.to(dtype)
    if device.type != "cuda" or t.device == device:
        return t.to(device)
    return t.pin_memory().to(device, non_blocking=True)


def level_arg(op: str, magnitude: float, negate: bool) -> float:
    """timm's level-to-argument function of ``op`` at ``magnitude`` (0..10); 0.0 for ops without one."""
    level = magnitude / 10.0
    sign = -1.0 if negate else 1.0
    if op == "Rotate":
        return sign * level * 30.0
    if op == "PosterizeIncreasing":
        return float(4 - int(level * 4))
    if op == "SolarizeIncreasing":
        return float(256 - min(256, int(level * 256)))
    if op == "SolarizeAdd":
        return float(min(128, int(level * 110)))
    if op.endswith("Increasing"):  # Color, Contrast, Brightness, Sharpness
        return max(0.1, 1.0 + sign * level * 0.9)
    if op in ("ShearX", "ShearY"):
        return sign * level * 0.3
    if op in ("TranslateXRel", "TranslateYRel"):
        return sign * level * TRANSLATE_PCT
    return 0.0


def blend(degenerate: torch.Tensor, image: torch.Tensor, factor: torch.Tensor) -> torch.Tensor:
    """PIL's ``Image.blend``: ``degenerate + factor * (image - degenerate)``, truncated to uint8."""
    f = factor.view(-1, 1, 1, 1)
    out = degenerate.float() + f * (image.float() - degenerate.float())
    return out.clamp(0, 255).floor().to(torch.uint8)


def luma(x: torch.Tensor) -> torch.Tensor:
    """PIL's ``convert("L")`` (ITU-R 601-2, integer arithmetic): uint8 ``[n, 3, H, W]`` -> int32 ``[n, 1, H, W]``."""
    r, g, b = x.int().unbind(1)
    return ((r * 19595 + g * 38470 + b * 7471 + 32768) >> 16).unsqueeze(1)


def smooth(x: torch.Tensor) -> torch.Tensor:
    """PIL's ``ImageFilter.SMOOTH`` (3x3, centre 5, /13), border pixels kept: uint8 ``[n, 3, H, W]``."""
    kernel = torch.ones(3, 1, 3, 3, device=x.device)
    kernel[:, :, 1, 1] = 5.0
    inner = torch.nn.functional.conv2d(x.float(), kernel / 13.0, groups=3)
    out = x.clone()
    out[..., 1:-1, 1:-1] = (inner + 0.5).floor().clamp(0, 255).to(torch.uint8)
    return out


def affine_matrices(op: str, args: list[float], height: int, width: int) -> torch.Tensor:
    """PIL's inverse affine coefficients ``(a, b, c, d, e, f)`` per sample, float64 ``[n, 6]``: an output
    pixel centre (X, Y) reads the input at (aX + bY + c, dX + eY + f)."""
    rows = []
    for v in args:
        if op == "ShearX":
            rows.append((1.0, v, 0.0, 0.0, 1.0, 0.0))
        elif op == "ShearY":
            rows.append((1.0, 0.0, 0.0, v, 1.0, 0.0))
        elif op == "TranslateXRel":
            rows.append((1.0, 0.0, v * width, 0.0, 1.0, 0.0))
        elif op == "TranslateYRel":
            rows.append((1.0, 0.0, 0.0, 0.0, 1.0, v * height))
        else:  # Rotate, as PIL's Image.rotate (about the centre, no expand)
            angle = -math.radians(v % 360.0)
            a, b, d, e = round(math.cos(angle), 15), round(math.sin(angle), 15), round(-math.sin(angle), 15), round(math.cos(angle), 15)
            cx, cy = width / 2.0, height / 2.0
            rows.append((a, b, a * -cx + b * -cy + cx, d, e, d * -cx + e * -cy + cy))
    return torch.tensor(rows, dtype=torch.float64)


def device_affine_matrices(op: str, args: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """``affine_matrices`` computed where ``args`` (float64 ``[n]``) lives, in a fixed number of ops."""
    one, zero = torch.ones_like(args), torch.zeros_like(args)
    if op == "ShearX":
        return torch.stack([one, args, zero, zero, one, zero], 1)
    if op == "ShearY":
        return torch.stack([one, zero, zero, args, one, zero], 1)
    if op == "TranslateXRel":
        return torch.stack([one, zero, args * width, zero, one, zero], 1)
    if op == "TranslateYRel":
        return torch.stack([one, zero, zero, zero, one, args * height], 1)
    angle = -torch.deg2rad(torch.remainder(args, 360.0))  # Rotate, about the centre
    a, b = torch.cos(angle), torch.sin(angle)
    cx, cy = width / 2.0, height / 2.0
    return torch.stack([a, b, a * -cx + b * -cy + cx, -b, a, -b * -cx + a * -cy + cy], 1)


def affine_warp(x: torch.Tensor, matrices: torch.Tensor, fill: tuple[int, int, int] | torch.Tensor) -> torch.Tensor:
    """Bicubic affine warp of uint8 ``[n, 3, H, W]`` by PIL coefficients ``[n, 6]``; pixels read from
    outside the image take ``fill`` (PIL's rule: the source point outside [0, W) x [0, H))."""
    n, _, h, w = x.shape
    dev = x.device
    m = host_values(matrices, dev, torch.float32).view(n, 1, 1, 2, 3)
    ys, xs = torch.meshgrid(
        torch.arange(h, device=dev, dtype=torch.float32) + 0.5, torch.arange(w, device=dev, dtype=torch.float32) + 0.5, indexing="ij"
    )
    points = torch.stack([xs, ys, torch.ones_like(xs)], -1)[:, :, None, :]  # [h, w, 1, 3]: (X, Y, 1)
    source = (m * points).sum(-1)  # [n, h, w, 2]: (x, y) read for each output pixel centre
    extent = w + (h - w) * torch.arange(2, device=dev)  # (w, h), made on the device
    warped = torch.nn.functional.grid_sample(x.float(), 2 * source / extent - 1, mode="bicubic", padding_mode="border", align_corners=False)
    inside = ((source >= 0) & (source < extent)).all(-1).unsqueeze(1)
    colour = host_values(fill, dev, torch.float32).view(1, 3, 1, 1)
    return torch.where(inside, warped.round().clamp(0, 255), colour).to(torch.uint8)


def apply_op(op: str, x: torch.Tensor, args: list[float] | torch.Tensor, fill: tuple[int, int, int] | torch.Tensor) -> torch.Tensor:
    """``op`` on every image of uint8 ``[n, 3, S, S]``, sample i with argument ``args[i]``; uint8 ``[n, 3, S, S]``.
    ``args`` (and ``fill``) may already be on ``x``'s device (float64 ``[n]``, ``[3]``): then nothing is copied."""
    if op == "AutoContrast":
        return TF.autocontrast(x)
    if op == "Equalize":
        return TF.equalize(x)
    if op == "Invert":
        return TF.invert(x)
    if op in ("Rotate", "ShearX", "ShearY", "TranslateXRel", "TranslateYRel"):
        if isinstance(args, torch.Tensor):
            return affine_warp(x, device_affine_matrices(op, args.double(), x.shape[-2], x.shape[-1]), fill)
        return affine_warp(x, affine_matrices(op, args, x.shape[-2], x.shape[-1]), fill)
    v = host_values(args, x.device, torch.float32)
    if op == "PosterizeIncreasing":
        bits = v.to(torch.int32)
        mask = (torch.bitwise_left_shift(torch.full_like(bits, 0xFF), (8 - bits).clamp(min=0)) & 0xFF).to(torch.uint8).view(-1, 1, 1, 1)
        return torch.where((bits >= 8).view(-1, 1, 1, 1), x, x & mask)
    if op == "SolarizeIncreasing":  # ImageOps.solarize: pixels >= threshold are inverted
        return torch.where(x.int() < v.view(-1, 1, 1, 1), x, 255 - x)
    if op == "SolarizeAdd":  # pixels below 128 get ``add``, capped at 255
        return torch.where(x < 128, (x.int() + v.int().view(-1, 1, 1, 1)).clamp(max=255).to(torch.uint8), x)
    if op == "ColorIncreasing":
        return blend(luma(x).expand_as(x), x, v)
    if op == "ContrastIncreasing":  # degenerate: the luma image's mean, rounded, everywhere
        mean = (luma(x).float().mean(dim=(1, 2, 3)) + 0.5).floor()
        return blend(mean.view(-1, 1, 1, 1).expand_as(x), x, v)
    if op == "BrightnessIncreasing":
        return blend(torch.zeros_like(x), x, v)
    if op == "SharpnessIncreasing":
        return blend(smooth(x), x, v)
    raise ValueError(f"unknown RandAugment op {op!r}; allowed: {', '.join(OPS)}")
