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
loader workers. The per-sample choices are a few dozen Python scalars; the pixel work runs
batched: crop + resize of the whole batch in a fixed number of ops (``trainables.data.gpu.resize``),
everything after on the whole batch, RandAugment one call per (layer, op) that any sample drew.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from trainables.data.gpu.randaugment import OPS, SIGNED, apply_op, host_values, level_arg
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
    """Standard normal noise ``[n, *shape]`` float32, row i a function of ``keys[i]`` (int64) alone."""
    count = math.prod(shape)
    counter = torch.arange(count, device=keys.device, dtype=torch.int64)
    lo, hi = (keys & 0xFFFFFFFF).view(-1, 1), ((keys >> 32) & 0xFFFFFFFF).view(-1, 1)

    def uniform(stream: int) -> torch.Tensor:
        bits = _mix32(_mix32(((2 * counter + stream) & 0xFFFFFFFF) ^ lo) ^ hi)
        return ((bits >> 8).float() + 0.5) / float(1 << 24)  # in (0, 1)

    u1, u2 = uniform(0), uniform(1)
    return (torch.sqrt(-2.0 * torch.log(u1)) * torch.cos(2.0 * math.pi * u2)).view(-1, *shape)


def _pack_rand_augment(pack: HostPack, draws: list[SampleDraw], recipe: DeviceRecipe) -> list[tuple[str, slice, slice]]:
    """Group the samples by (position in their list of applied ops, op): ``(op, rows, args)`` per
    group, in each sample's order. Every one of the ``ra_layers x 15`` groups is issued, empty or
    not (an empty one costs its ops but no work), so the ops per batch do not depend on the draws
    (but for torchvision's autocontrast and equalize, which return early on an empty batch)."""
    if recipe.augment != "deit":
        return []
    groups = []
    for position in range(recipe.ra_layers):
        by_op: dict[str, list[int]] = {op: [] for op in OPS}
        for i, d in enumerate(draws):
            if position < len(d.ops):
                by_op[d.ops[position][0]].append(i)
        for op, rows in by_op.items():
            groups.append(
                (
                    op,
                    pack.add(np.array(rows, dtype=np.int64)),
                    pack.add(np.array([draws[i].ops[position][1] for i in rows], dtype=np.float64)),
                )
            )
    return groups


def _rand_augment(x: torch.Tensor, groups: list[tuple[str, slice, slice]], pack: HostPack, fill: torch.Tensor) -> torch.Tensor:
    """Apply each group's op to its rows of uint8 ``[B, 3, S, S]``, one batched call per group."""
    for op, rows, args in groups:
        index = pack.ints(rows)
        x.index_copy_(0, index, apply_op(op, x.index_select(0, index), pack.ints(args).view(torch.float64), fill))
    return x


def _erase(x: torch.Tensor, rows: slice, boxes: slice, keys: slice, pack: HostPack) -> torch.Tensor:
    """Random erasing with per-pixel N(0, 1) noise (on normalised ``[B, 3, S, S]``) inside each drawn
    box; issued when no sample erases too, so the ops per batch stay the same."""
    (_, h, w) = x.shape[1:]
    index, box = pack.ints(rows), pack.ints(boxes).view(-1, 4)  # top, left, height, width
    ys, xs = torch.arange(h, device=x.device), torch.arange(w, device=x.device)
    in_rows = (ys >= box[:, 0:1]) & (ys < box[:, 0:1] + box[:, 2:3])
    in_cols = (xs >= box[:, 1:2]) & (xs < box[:, 1:2] + box[:, 3:4])
    mask = (in_rows[:, :, None] & in_cols[:, None, :])[:, None]
    noise = hash_normal(pack.ints(keys), x.shape[1:])
    return x.index_copy_(0, index, torch.where(mask, noise, x.index_select(0, index)))


def augment_batch(images: Sequence[torch.Tensor], seeds: Sequence[int], recipe: DeviceRecipe) -> torch.Tensor:
    """Decoded uint8 images ``[3, H_i, W_i]`` (one device) and their seeds -> float32 ``[B, 3, S, S]``,
    normalised, on the images' device. The same number of tensor ops whatever B >= 4 (DeiT's
    recipe: 1,315; a few dozen fewer in a batch where no sample drew AutoContrast or Equalize as
    its second op, about 1 batch in 40 at B = 256) and one host -> device copy of the batch's random parameters."""
    if len(images) != len(seeds):
        raise ValueError(f"{len(images)} images but {len(seeds)} seeds")
    if not images:
        raise ValueError("augment_batch needs at least one image")
    device = images[0].device
    draws = [draw_sample(int(s), int(im.shape[-2]), int(im.shape[-1]), recipe) for im, s in zip(images, seeds)]
    table = _resize_table(images, draws, recipe)
    pack = HostPack()
    resize_part = pack.add(resize_host_values(table))
    flips = pack.add([d.flip for d in draws])
    groups = _pack_rand_augment(pack, draws, recipe)
    fill, mean, std = pack.add(recipe.fill), pack.add(recipe.mean), pack.add(recipe.std)
    erased = [i for i, d in enumerate(draws) if d.erase is not None]
    erase_rows = pack.add(np.array(erased, dtype=np.int64))
    erase_boxes = pack.add(np.array([draws[i].erase for i in erased], dtype=np.int64).reshape(-1, 4))
    erase_keys = pack.add(np.array([draws[i].noise_key for i in erased], dtype=np.int64))
    pack.upload(device)

    x = resize_crops(flat_images(images), table, recipe.img_size, pack.ints(resize_part))
    x = torch.where(pack.ints(flips).bool().view(-1, 1, 1, 1), x.flip(-1), x)
    x = _rand_augment(x, groups, pack, pack.ints(fill).float())
    x = (x.float() / 255.0 - pack.floats(mean).view(1, 3, 1, 1)) / pack.floats(std).view(1, 3, 1, 1)
    return _erase(x, erase_rows, erase_boxes, erase_keys, pack) if recipe.augment == "deit" else x
