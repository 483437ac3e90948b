"""The training transforms of ``data.augment`` on decoded uint8 images, on their device
(``data.decode: gpu``; the same code on the CPU in tests).

DeiT's recipe as timm builds it (``create_transform(is_training=True, auto_augment=
"rand-m9-mstd0.5-inc1", re_prob=0.25, interpolation="bicubic")``): random-resized crop (scale
0.08-1, ratio 3/4-4/3, bicubic, antialiased), horizontal flip, RandAugment (2 ops with
replacement from timm's 15 increasing ops, each applied with probability 0.5 at magnitude
N(9, 0.5) clipped to [0, 9.999]: see ``trainables.data.transforms.RAND_AUGMENT_MAX_MAGNITUDE``),
normalisation, random erasing (p 0.25, per-pixel normal noise). ``small``: crop, flip, normalise;
``none``: timm's evaluation resize and centre crop.

Randomness: every random choice of a sample comes from ``random.Random(seed)`` of that sample's
own seed (drawn in timm's order), and the erasing noise from a counter-based hash of that seed,
so a sample's result depends on its seed alone: not on the batch it is in, nor on the number of
loader workers. The per-sample choices are a few dozen Python scalars, moved to the device in one
copy with one entry per sample whatever it drew; the pixel work runs batched: crop + resize of the
whole batch in a fixed number of ops (``trainables.data.gpu.resize``), then ``augment_resized``:
flip, RandAugment (every op kind on every image, selected per sample:
``trainables.data.gpu.randaugment_batch``), normalisation and erasing, whose ops and tensor shapes
depend on the batch size alone, so that part can be captured once and replayed.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from trainables.data.gpu.randaugment import OPS, SIGNED, host_values, level_arg
from trainables.data.gpu.randaugment_batch import NO_OP, rand_augment_layer
from trainables.data.gpu.resize import flat_images, resize_crops, resize_host_values, resize_table

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


@dataclass(frozen=True)
class DeviceRecipe:
    """What ``augment_batch`` does: ``augment`` is ``data.augment`` (``deit`` | ``small`` | ``none``)."""

    img_size: int
    augment: str = "deit"
    mean: tuple[float, float, float] = IMAGENET_MEAN
    std: tuple[float, float, float] = IMAGENET_STD
    scale: tuple[float, float] = (0.08, 1.0)
    ratio: tuple[float, float] = (3 / 4, 4 / 3)
    ra_layers: int = 2
    ra_magnitude: float = 9.0
    ra_std: float = 0.5
    ra_prob: float = 0.5
    ra_max: float = 9.999
    re_prob: float = 0.25

    @property
    def fill(self) -> tuple[int, int, int]:
        """timm's ``img_mean`` fill of RandAugment's geometric ops."""
        r, g, b = (min(255, round(255 * m)) for m in self.mean)
        return r, g, b


@dataclass
class SampleDraw:
    """One sample's random choices: crop box, flip, the RandAugment ops it applies
    (op name, argument), the erased box (or None) and the key of its erasing noise."""

    crop: tuple[int, int, int, int]  # top, left, height, width in the decoded image
    flip: bool = False
    ops: list[tuple[str, float]] = field(default_factory=list)
    erase: tuple[int, int, int, int] | None = None
    noise_key: int = 0


def _crop_box(rng: random.Random, height: int, width: int, recipe: DeviceRecipe) -> tuple[int, int, int, int]:
    """timm's ``RandomResizedCropAndInterpolation.get_params`` (10 tries, then a centre crop)."""
    area = height * width
    log_ratio = (math.log(recipe.ratio[0]), math.log(recipe.ratio[1]))
    for _ in range(10):
        target = rng.uniform(*recipe.scale) * area
        aspect = math.exp(rng.uniform(*log_ratio))
        w, h = int(round(math.sqrt(target * aspect))), int(round(math.sqrt(target / aspect)))
        if w <= width and h <= height:
            return rng.randint(0, height - h), rng.randint(0, width - w), h, w
    in_ratio = width / height
    if in_ratio < min(recipe.ratio):
        w, h = width, int(round(width / min(recipe.ratio)))
    elif in_ratio > max(recipe.ratio):
        h, w = height, int(round(height * max(recipe.ratio)))
    else:
        w, h = width, height
    return (height - h) // 2, (width - w) // 2, h, w


def _erase_box(rng: random.Random, size: int) -> tuple[int, int, int, int] | None:
    """timm's ``RandomErasing`` box (area 0.02-1/3, log-ratio 0.3-1/0.3, 10 tries) on a square image."""
    area = size * size
    log_ratio = (math.log(0.3), math.log(1 / 0.3))
    for _ in range(10):
        target = rng.uniform(0.02, 1 / 3) * area
        aspect = math.exp(rng.uniform(*log_ratio))
        h, w = int(round(math.sqrt(target * aspect))), int(round(math.sqrt(target / aspect)))
        if w < size and h < size:
            return rng.randint(0, size - h), rng.randint(0, size - w), h, w
    return None


def draw_sample(seed: int, height: int, width: int, recipe: DeviceRecipe) -> SampleDraw:
    """The random choices for one decoded ``height`` x ``width`` image, from ``seed`` alone."""
    rng = random.Random(seed)
    if recipe.augment == "none":
        return SampleDraw((0, 0, height, width))
    draw = SampleDraw(_crop_box(rng, height, width, recipe), flip=rng.random() < 0.5)
    if recipe.augment != "deit":
        return draw
    for _ in range(recipe.ra_layers):
        op = OPS[rng.randrange(len(OPS))]
        if rng.random() > recipe.ra_prob:
            continue
        magnitude = max(0.0, min(rng.gauss(recipe.ra_magnitude, recipe.ra_std), recipe.ra_max))
        negate = rng.random() > 0.5 if op in SIGNED else False
        draw.ops.append((op, level_arg(op, magnitude, negate)))
    if rng.random() <= recipe.re_prob:
        draw.erase = _erase_box(rng, recipe.img_size)
    draw.noise_key = rng.getrandbits(62)
    return draw


class HostPack:
    """A batch's host-side values (crop tables, flips, RandAugment rows and arguments, erased boxes)
    gathered into one int64 buffer and moved to the device in one copy; floats travel as their bits."""

    def __init__(self) -> None:
        self.parts: list[np.ndarray] = []
        self.size = 0
        self.on_device: torch.Tensor | None = None

    def add(self, values: object) -> slice:
        a = np.asarray(values)
        a = a.astype(np.float64).view(np.int64) if a.dtype.kind == "f" else a.astype(np.int64)
        self.parts.append(a.ravel())
        self.size += a.size
        return slice(self.size - a.size, self.size)

    def upload(self, device: torch.device) -> None:
        self.on_device = host_values(torch.from_numpy(np.concatenate(self.parts)), device)

    def ints(self, part: slice) -> torch.Tensor:
        """int64 ``[n]`` on the device (a view of the one copy)."""
        assert self.on_device is not None, "upload() first"
        return self.on_device[part]

    def floats(self, part: slice) -> torch.Tensor:
        """float32 ``[n]`` on the device."""
        return self.ints(part).view(torch.float64).float()


def _resize_table(images: Sequence[torch.Tensor], draws: list[SampleDraw], recipe: DeviceRecipe) -> np.ndarray:
    """The crop + resize parameters of the batch (``trainables.data.gpu.resize.resize_table``)."""
    size = recipe.img_size
    eval_resize = math.floor(size / (0.875 if size >= 64 else 1.0)) if recipe.augment == "none" else None
    shapes = [(int(im.shape[-2]), int(im.shape[-1])) for im in images]
    return resize_table(shapes, [d.crop for d in draws], size, eval_resize)


def _mul32(x: torch.Tensor, c: int) -> torch.Tensor:
    """``x * c mod 2**32`` for int64 ``x`` in [0, 2**32) without overflowing int64."""
    return (x * (c & 0xFFFF) + (((x * (c >> 16)) & 0xFFFF) << 16)) & 0xFFFFFFFF


def _mix32(x: torch.Tensor) -> torch.Tensor:
    """A 32-bit integer hash (lowbias32): a bijection of [0, 2**32), the same on every device."""
    x = x ^ (x >> 16)
    x = _mul32(x, 0x7FEB352D)
    x = x ^ (x >> 15)
    x = _mul32(x, 0x846CA68B)
    return x ^ (x >> 16)


def hash_normal(keys: torch.Tensor, shape: Sequence[int]) -> torch.Tensor:
    """Standard normal noise ``[n, *shape]`` float32, row i a function of ``keys[i]`` (int64) alone.
    Box-Muller on pairs of hashed uniforms, both of its normals kept: one hashed pair per two values."""
    count = math.prod(shape)
    pairs = torch.arange((count + 1) // 2, device=keys.device, dtype=torch.int64)
    lo, hi = (keys & 0xFFFFFFFF).view(-1, 1), ((keys >> 32) & 0xFFFFFFFF).view(-1, 1)

    def uniform(stream: int) -> torch.Tensor:
        bits = _mix32(_mix32(((2 * pairs + stream) & 0xFFFFFFFF) ^ lo) ^ hi)
        return ((bits >> 8).float() + 0.5) / float(1 << 24)  # in (0, 1)

    radius, angle = torch.sqrt(-2.0 * torch.log(uniform(0))), 2.0 * math.pi * uniform(1)
    normals = torch.stack([radius * torch.cos(angle), radius * torch.sin(angle)], -1).view(len(keys), -1)
    return normals[:, :count].reshape(-1, *shape)


@dataclass(frozen=True)
class BatchParams:
    """A batch's random parameters on the device, one entry per sample whatever it drew (so their
    shapes depend on the batch size alone): ``flips`` int64 ``[B]``; ``ra_ops`` int64 ``[L, B]``
    (index into ``OPS``, ``NO_OP`` where layer l applies nothing); ``ra_args`` float64 ``[L, B]``;
    ``erase_boxes`` int64 ``[B, 4]`` (top, left, height, width; empty where nothing is erased);
    ``noise_keys`` int64 ``[B]``; ``fill``, ``mean``, ``std`` float32 ``[3]``."""

    flips: torch.Tensor
    ra_ops: torch.Tensor
    ra_args: torch.Tensor
    erase_boxes: torch.Tensor
    noise_keys: torch.Tensor
    fill: torch.Tensor
    mean: torch.Tensor
    std: torch.Tensor


def pack_params(pack: HostPack, draws: list[SampleDraw], recipe: DeviceRecipe) -> dict[str, slice]:
    """Add the batch's per-sample parameters (``BatchParams``' fields) to ``pack``: where each lies."""
    layers = recipe.ra_layers if recipe.augment == "deit" else 0
    ops = np.full((layers, len(draws)), NO_OP, dtype=np.int64)
    args = np.zeros((layers, len(draws)), dtype=np.float64)
    for i, d in enumerate(draws):
        for layer, (op, arg) in enumerate(d.ops):  # a sample's applied ops, in its order
            ops[layer, i], args[layer, i] = OPS.index(op), arg
    boxes = np.array([d.erase or (0, 0, 0, 0) for d in draws], dtype=np.int64).reshape(-1, 4)
    return {
        "flips": pack.add([d.flip for d in draws]),
        "ra_ops": pack.add(ops),
        "ra_args": pack.add(args),
        "erase_boxes": pack.add(boxes),
        "noise_keys": pack.add(np.array([d.noise_key for d in draws], dtype=np.int64)),
        "fill": pack.add(np.array(recipe.fill, dtype=np.float64)),
        "mean": pack.add(np.array(recipe.mean, dtype=np.float64)),
        "std": pack.add(np.array(recipe.std, dtype=np.float64)),
    }


def batch_params(pack: HostPack, parts: dict[str, slice], batch: int) -> BatchParams:
    """``pack_params``' parts as device tensors (views of the pack's one copy)."""
    return BatchParams(
        flips=pack.ints(parts["flips"]),
        ra_ops=pack.ints(parts["ra_ops"]).view(-1, batch),
        ra_args=pack.ints(parts["ra_args"]).view(torch.float64).view(-1, batch),
        erase_boxes=pack.ints(parts["erase_boxes"]).view(batch, 4),
        noise_keys=pack.ints(parts["noise_keys"]),
        fill=pack.floats(parts["fill"]),
        mean=pack.floats(parts["mean"]),
        std=pack.floats(parts["std"]),
    )


def _erase(x: torch.Tensor, boxes: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """Random erasing: per-pixel N(0, 1) noise (keyed by ``keys`` int64 ``[B]``) inside each sample's
    box (``boxes`` int64 ``[B, 4]``: top, left, height, width; height 0 erases nothing) of the
    normalised ``[B, 3, S, S]``. The noise is made for every sample, so the ops and shapes are the
    batch size's alone."""
    (_, h, w) = x.shape[1:]
    ys, xs = torch.arange(h, device=x.device), torch.arange(w, device=x.device)
    in_rows = (ys >= boxes[:, 0:1]) & (ys < boxes[:, 0:1] + boxes[:, 2:3])
    in_cols = (xs >= boxes[:, 1:2]) & (xs < boxes[:, 1:2] + boxes[:, 3:4])
    mask = (in_rows[:, :, None] & in_cols[:, None, :])[:, None]
    return torch.where(mask, hash_normal(keys, x.shape[1:]), x)


def augment_resized(x: torch.Tensor, params: BatchParams, recipe: DeviceRecipe) -> torch.Tensor:
    """Everything after the crop + resize: uint8 ``[B, 3, S, S]`` -> normalised float32 ``[B, 3, S, S]``
    (flip, RandAugment, normalisation, erasing). The same ops on tensors of the same shapes for
    every batch of B samples, whatever their draws; no host sync: capturable once and replayable."""
    x = torch.where(params.flips.bool().view(-1, 1, 1, 1), x.flip(-1), x)
    for op, arg in zip(params.ra_ops, params.ra_args):
        x = rand_augment_layer(x, op, arg, params.fill)
    x = (x.float() / 255.0 - params.mean.view(1, 3, 1, 1)) / params.std.view(1, 3, 1, 1)
    return _erase(x, params.erase_boxes, params.noise_keys) if recipe.augment == "deit" else x


def augment_batch(
    images: Sequence[torch.Tensor],
    seeds: Sequence[int],
    recipe: DeviceRecipe,
    finish: Callable[[torch.Tensor, BatchParams], torch.Tensor] | None = None,
) -> torch.Tensor:
    """Decoded uint8 images ``[3, H_i, W_i]`` (one device) and their seeds -> float32 ``[B, 3, S, S]``,
    normalised, on the images' device. One host -> device copy of the batch's random parameters;
    the crop + resize's tensor shapes follow the crops, ``augment_resized``'s (709 aten ops for
    DeiT's recipe) depend on B alone; 1,013-1,015 aten ops in all at B = 256 and at 512. ``finish``:
    ``augment_resized`` for this recipe, compiled (``compiled.CompiledAugment``); None runs it eagerly."""
    if len(images) != len(seeds):
        raise ValueError(f"{len(images)} images but {len(seeds)} seeds")
    if not images:
        raise ValueError("augment_batch needs at least one image")
    device = images[0].device
    draws = [draw_sample(int(s), int(im.shape[-2]), int(im.shape[-1]), recipe) for im, s in zip(images, seeds)]
    table = _resize_table(images, draws, recipe)
    pack = HostPack()
    resize_part = pack.add(resize_host_values(table))
    parts = pack_params(pack, draws, recipe)
    pack.upload(device)
    x = resize_crops(flat_images(images), table, recipe.img_size, pack.ints(resize_part))
    params = batch_params(pack, parts, len(images))
    return finish(x, params) if finish is not None else augment_resized(x, params, recipe)
