"""The batched crop + resize of ``data.decode: gpu``: torchvision's antialiased bicubic per image,
timm's crop distribution, and a number of ops that does not grow with the batch."""

import math

import numpy as np
import pytest
import torch
import torchvision.transforms.v2.functional as TF
from torch.utils._python_dispatch import TorchDispatchMode

from trainables.data.gpu.augment import DeviceRecipe, augment_batch, draw_sample
from trainables.data.gpu.resize import flat_images, resize_crops, resize_table

BICUBIC = TF.InterpolationMode.BICUBIC


def textured(rng, h, w):
    """Smooth waves plus noise: both down- and upscaling have something to get wrong."""
    ys, xs = np.mgrid[0:h, 0:w]
    waves = (np.stack([np.sin(xs / 7.0), np.cos(ys / 5.0), np.sin((xs + ys) / 9.0)]) + 1) * 60
    return torch.from_numpy((waves + rng.integers(0, 120, (3, h, w))).astype(np.uint8))


class OpCount(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops += 1
        return func(*args, **(kwargs or {}))


def test_each_crop_equals_torchvision_s_antialiased_bicubic_resized_crop():
    rng = np.random.default_rng(0)
    images, boxes = [], []
    for _ in range(12):  # crops from 1 px (upscaled 24x) to ~400 px (downscaled 16x)
        h_img, w_img = (int(v) for v in rng.integers(20, 420, 2))
        h, w = int(rng.integers(1, h_img + 1)), int(rng.integers(1, w_img + 1))
        images.append(textured(rng, h_img, w_img))
        boxes.append((int(rng.integers(0, h_img - h + 1)), int(rng.integers(0, w_img - w + 1)), h, w))
    out = resize_crops(flat_images(images), resize_table([im.shape[1:] for im in images], boxes, 24), 24)
    assert out.shape == (12, 3, 24, 24) and out.dtype == torch.uint8
    for image, box, got in zip(images, boxes, out):
        want = TF.resized_crop(image.float(), *box, [24, 24], interpolation=BICUBIC, antialias=True)
        assert (got.float() - want.round().clamp(0, 255)).abs().max() <= 1, box  # float rounding only
        want_uint8 = TF.resized_crop(image, *box, [24, 24], interpolation=BICUBIC, antialias=True)
        assert (got.int() - want_uint8.int()).abs().float().mean() < 0.3, box  # torch's uint8 kernel rounds between passes
        plain = TF.resized_crop(image, *box, [24, 24], interpolation=BICUBIC, antialias=False)
        if box[2] > 96:  # >4x downscaling: without antialiasing the result is visibly different
            assert (got.int() - plain.int()).abs().float().mean() > 2


def test_the_evaluation_resize_and_centre_crop_equal_torchvision_s():
    rng = np.random.default_rng(1)
    images = [textured(rng, 50, 80), textured(rng, 90, 40)]
    table = resize_table([im.shape[1:] for im in images], [(0, 0, *im.shape[1:]) for im in images], 32, eval_resize=36)
    for image, got in zip(images, resize_crops(flat_images(images), table, 32)):
        want = TF.center_crop(TF.resize(image.float(), [36], interpolation=BICUBIC, antialias=True), [32, 32])
        assert (got.float() - want.round().clamp(0, 255)).abs().max() <= 1


def test_a_box_outside_its_image_is_refused_before_any_work():
    with pytest.raises(ValueError, match=r"crop box \(5, 0, 10, 10\) is not inside an image of 12x20"):
        resize_table([(12, 20)], [(5, 0, 10, 10)], 8)


def ks_distance(a, b):
    grid = np.sort(np.concatenate([a, b]))
    return np.abs(np.searchsorted(np.sort(a), grid, "right") / len(a) - np.searchsorted(np.sort(b), grid, "right") / len(b)).max()


def test_crop_boxes_follow_timm_s_random_resized_crop():
    """Two-sample Kolmogorov-Smirnov distances of area fraction, log aspect ratio and relative
    position against timm's own ``RandomResizedCropAndInterpolation.get_params`` (critical value
    1.95 sqrt(2/n), alpha 0.001), on a landscape and a portrait image."""
    import random

    from PIL import Image
    from timm.data.transforms import RandomResizedCropAndInterpolation

    n, timm_crop = 3000, RandomResizedCropAndInterpolation(224)
    random.seed(0)

    def features(b: np.ndarray, height: int, width: int) -> tuple[np.ndarray, ...]:
        """Per box: its share of the image, its log aspect ratio and its (relative) centre."""
        return (b[:, 2] * b[:, 3] / (height * width), np.log(b[:, 3] / b[:, 2]), b[:, 0], b[:, 1])

    for height, width in ((375, 500), (500, 333)):
        picture = Image.new("RGB", (width, height))
        ours = np.array([draw_sample(s, height, width, DeviceRecipe(224)).crop for s in range(n)], dtype=float)
        theirs = np.array([timm_crop.get_params(picture, timm_crop.scale, timm_crop.ratio) for _ in range(n)], dtype=float)
        for boxes in (ours, theirs):
            boxes[:, 0] = (boxes[:, 0] + boxes[:, 2] / 2) / height  # box centre, relative
            boxes[:, 1] = (boxes[:, 1] + boxes[:, 3] / 2) / width
        for ours_f, theirs_f in zip(features(ours, height, width), features(theirs, height, width)):
            assert ks_distance(ours_f, theirs_f) < 1.95 * math.sqrt(2 / n)
        # and the test can fail: a crop distribution with the scale range shifted is told apart
        shifted = np.array([draw_sample(s, height, width, DeviceRecipe(224, scale=(0.2, 1.0))).crop for s in range(n)], dtype=float)
        assert ks_distance(shifted[:, 2] * shifted[:, 3], theirs[:, 2] * theirs[:, 3]) > 0.1


def test_ops_per_batch_do_not_grow_with_the_batch():
    """The whole DeiT augmentation in a fixed number of aten ops (each one or more kernel launches
    on CUDA): the same at B=256 and B=512, at most 1,100, and no more at B=8 (every RandAugment
    op kind runs on the whole batch)."""
    rng = np.random.default_rng(2)
    counts = []
    for batch in (8, 256, 512):
        images = [torch.from_numpy(rng.integers(0, 256, (3, int(h), int(w)), dtype=np.uint8)) for h, w in rng.integers(20, 40, (batch, 2))]
        with OpCount() as count:
            x = augment_batch(images, list(range(batch)), DeviceRecipe(16))
        assert x.shape == (batch, 3, 16, 16)
        counts.append(count.ops)
    assert counts[0] <= counts[1] == counts[2] <= 1100, counts
