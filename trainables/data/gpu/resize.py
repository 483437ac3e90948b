"""Crop + resize of a whole batch of differently sized images in a fixed number of tensor ops.

The images (uint8 ``[3, H_i, W_i]``, one device) become one flat buffer (one op); each sample's
crop box is gathered into a padded batch and resized by two batched matrix products with
per-sample weight matrices. The weights are torch's antialiased bicubic ones
(``aten::_upsample_bicubic2d_aa``, what ``torchvision``'s ``resize(..., antialias=True)`` runs,
itself PIL's algorithm: cubic a = -0.5, support widened by the downscale factor, window cut at the
crop's edges and renormalised), computed on the device for all samples at once, so the result
equals ``TF.resized_crop(image.float(), top, left, h, w, [S, S], BICUBIC, antialias=True)`` per
image up to float rounding (one grey level; torch's uint8 kernel, which rounds between its two
passes, is within a few grey levels, 0.1-0.2 on average). Nothing here depends on the batch size but the tensor
shapes: the op count is the same at B = 256 and B = 512.

Padding: the samples are sorted by crop area and split into ``GROUPS`` groups, each padded only to
its own largest crop, so one large image pads a quarter of the batch, not all of it. A group's
transient memory is about 9 bytes per padded source pixel and channel (int32 gather index, uint8
crop, float32 crop): for 64 samples whose largest crop is 500x500, 0.4 GB; for a group whose largest
crop is 2000x1500 (ImageNet has a few such images), 5 GB. The resize is a dense product: about
2 S H W multiply-adds per channel for an H x W crop (0.25 GFLOP for 500x375 at S = 224), cheap on a
GPU, slower than a sparse per-image kernel on a CPU.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
import torch

#: groups of samples padded together (sorted by crop area); a constant, so ops per batch are too
GROUPS = 4
#: columns of the per-sample parameter table (int64): where the image lies in the flat buffer,
#: its size, the crop box, and per axis the size of the full resized image and the output's offset
#: in it (RandomResizedCrop: full = S, offset 0; evaluation: the resized shorter side, centre crop)
COLUMNS = ("offset", "height", "width", "top", "left", "crop_h", "crop_w", "full_h", "off_h", "full_w", "off_w")


def flat_images(images: Sequence[torch.Tensor]) -> torch.Tensor:
    """uint8 ``[3, H_i, W_i]`` images -> one contiguous uint8 buffer ``[sum 3 H_i W_i]`` (one copy)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The PyTorch API of nested tensors is in prototype stage")
        return torch.nested.as_nested_tensor(list(images)).values()


def resize_table(
    shapes: Sequence[tuple[int, int]], boxes: Sequence[tuple[int, int, int, int]], size: int, eval_resize: int | None = None
) -> np.ndarray:
    """The per-sample parameter table, int64 ``[B, len(COLUMNS)]``, from the images' ``(H, W)`` and
    crop boxes ``(top, left, h, w)``. ``eval_resize``: resize the shorter side to it and centre-crop
    ``size`` (torchvision's ``resize`` + ``center_crop``; the box must then be the whole image)."""
    table = np.zeros((len(shapes), len(COLUMNS)), dtype=np.int64)
    offset = 0
    for row, ((h_img, w_img), (top, left, h, w)) in enumerate(zip(shapes, boxes)):
        if not (top >= 0 and top + h <= h_img and left >= 0 and left + w <= w_img and h > 0 and w > 0):
            raise ValueError(f"crop box {(top, left, h, w)} is not inside an image of {h_img}x{w_img}")
        full_h = full_w = size
        off_h = off_w = 0
        if eval_resize is not None:
            short, long = (h, w) if h <= w else (w, h)
            new_long = int(eval_resize * long / short)
            full_h, full_w = (eval_resize, new_long) if h <= w else (new_long, eval_resize)
            off_h, off_w = int(round((full_h - size) / 2.0)), int(round((full_w - size) / 2.0))
        table[row] = (offset, h_img, w_img, top, left, h, w, full_h, off_h, full_w, off_w)
        offset += 3 * h_img * w_img
    return table


def _cubic(t: torch.Tensor, a: float = -0.5) -> torch.Tensor:
    """Keys' cubic convolution kernel (PIL's and torch's antialiased bicubic, a = -0.5)."""
    t = t.abs()
    near = ((a + 2) * t - (a + 3)) * t * t + 1
    far = (((t - 5) * t + 8) * t - 4) * a
    return torch.where(t < 1, near, torch.where(t < 2, far, torch.zeros_like(t)))


def axis_weights(length: torch.Tensor, full: torch.Tensor, offset: torch.Tensor, size: int, extent: int) -> torch.Tensor:
    """Resampling weights along one axis, float32 ``[n, size, extent]``: output pixel i of sample k
    (pixel ``i + offset[k]`` of the crop's ``length[k]`` pixels resized to ``full[k]``) is
    ``sum_j w[k, i, j] * crop[j]``; zero for ``j >= length[k]``. Inputs: int64 ``[n]``."""
    length, full, offset = length.double(), full.double(), offset.double()
    scale = (length / full)[:, None]  # [n, 1]
    widen = scale.clamp(min=1.0)
    centre = scale * (torch.arange(size, device=length.device, dtype=torch.float64) + offset[:, None] + 0.5)  # [n, size]
    lo = (centre - 2 * widen + 0.5).trunc().clamp(min=0)
    hi = torch.minimum((centre + 2 * widen + 0.5).floor(), length[:, None])
    j = torch.arange(extent, device=length.device, dtype=torch.float64)
    w = _cubic((j - centre[..., None] + 0.5) / widen[..., None])  # [n, size, extent]
    w = w * ((j >= lo[..., None]) & (j < hi[..., None]))
    return (w / w.sum(-1, keepdim=True)).float()


def _group_order(table: np.ndarray) -> np.ndarray:
    """The samples sorted by crop area (the groups are consecutive runs of this order)."""
    return np.argsort(table[:, 5] * table[:, 6], kind="stable")


def resize_host_values(table: np.ndarray) -> np.ndarray:
    """What ``resize_crops`` needs on the device, int64 ``[B * (len(COLUMNS) + 1)]``: the table in
    group order, then the inverse of that order."""
    order = _group_order(table)
    return np.concatenate([table[order].ravel(), np.argsort(order)])


def resize_crops(flat: torch.Tensor, table: np.ndarray, size: int, on_device: torch.Tensor | None = None) -> torch.Tensor:
    """Every sample's crop resized: ``flat`` (``flat_images``), ``table`` (``resize_table``, host)
    -> uint8 ``[B, 3, size, size]`` on ``flat``'s device. ``on_device``: ``resize_host_values(table)``
    already on the device (part of the batch's one copy); copied here when not given."""
    n, dev = len(table), flat.device
    order = _group_order(table)
    bounds = np.cumsum([0] + [len(g) for g in np.array_split(order, min(GROUPS, n)) if len(g)])
    if on_device is None:
        host = torch.from_numpy(resize_host_values(table))
        on_device = host.pin_memory().to(dev, non_blocking=True) if dev.type == "cuda" else host.to(dev)
    p, inverse = on_device[: table.size].view(n, len(COLUMNS)), on_device[table.size :]
    offset, height, width, top, left, crop_h, crop_w, full_h, off_h, full_w, off_w = p.unbind(1)
    max_h, max_w = int(table[:, 5].max()), int(table[:, 6].max())  # host values: no sync
    wy = axis_weights(crop_h, full_h, off_h, size, max_h)  # [B, size, max_h]
    wx = axis_weights(crop_w, full_w, off_w, size, max_w)  # [B, size, max_w]
    ys, xs = torch.arange(max_h, device=dev), torch.arange(max_w, device=dev)
    rows = (top[:, None] + torch.minimum(ys, crop_h[:, None] - 1)) * width[:, None]  # [B, max_h], edge-padded
    cols = left[:, None] + torch.minimum(xs, crop_w[:, None] - 1)  # [B, max_w]
    planes = offset[:, None] + torch.arange(3, device=dev) * (height * width)[:, None]  # [B, 3]
    if flat.numel() < 2**31:  # the full-size gather index in int32: 4 bytes per pixel, not 8
        rows, cols, planes = rows.int(), cols.int(), planes.int()
    outs = []
    for lo, hi in zip(bounds[:-1], bounds[1:]):  # each group padded to its own largest crop
        h, w = int(table[order[lo:hi], 5].max()), int(table[order[lo:hi], 6].max())
        index = planes[lo:hi, :, None, None] + rows[lo:hi, None, :h, None] + cols[lo:hi, None, None, :w]
        crops = flat[index].float()  # [n, 3, h, w]
        outs.append(wy[lo:hi, None, :, :h] @ crops @ wx[lo:hi, None, :, :w].transpose(-1, -2))
    return torch.cat(outs)[inverse].round_().clamp_(0, 255).to(torch.uint8)
