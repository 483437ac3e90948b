"""The augmentations of ``data.decode: gpu``, one sample at a time: every RandAugment op against
PIL, the erasing noise, the random choices of timm's DeiT recipe, and the ``small`` and ``none``
recipes."""

import math

import numpy as np
import pytest
import torch
from PIL import Image

from tests.trainables.data.gpu.photos import photo
from trainables.data.gpu.augment import DeviceRecipe, augment_batch, hash_normal
from trainables.data.gpu.randaugment import OPS, apply_op, level_arg


@pytest.mark.parametrize("op", OPS)
def test_every_randaugment_op_keeps_shape_and_changes_the_image(op):
    x = torch.from_numpy(photo(np.random.default_rng(2), 20, 20)).permute(2, 0, 1)[None].repeat(2, 1, 1, 1).contiguous()
    args = [level_arg(op, 9.0, negate=False), level_arg(op, 9.0, negate=True)]
    out = apply_op(op, x, args, (124, 116, 104))
    assert out.shape == x.shape and out.dtype == torch.uint8
    assert not torch.equal(out, x)


def test_ops_match_pil_where_they_are_lookups_or_blends():
    from PIL import ImageEnhance, ImageOps

    img = photo(np.random.default_rng(3), 16, 16)
    x = torch.from_numpy(img).permute(2, 0, 1)[None]
    pil = Image.fromarray(img)
    expected = {
        "SolarizeIncreasing": ImageOps.solarize(pil, 128),
        "PosterizeIncreasing": ImageOps.posterize(pil, 2),
        "ColorIncreasing": ImageEnhance.Color(pil).enhance(1.6),
        "ContrastIncreasing": ImageEnhance.Contrast(pil).enhance(0.4),
        "BrightnessIncreasing": ImageEnhance.Brightness(pil).enhance(1.3),
        "SharpnessIncreasing": ImageEnhance.Sharpness(pil).enhance(1.8),
    }
    args = {
        "SolarizeIncreasing": 128,
        "PosterizeIncreasing": 2,
        "ColorIncreasing": 1.6,
        "ContrastIncreasing": 0.4,
        "BrightnessIncreasing": 1.3,
        "SharpnessIncreasing": 1.8,
    }
    for op, want in expected.items():
        got = apply_op(op, x, [float(args[op])], (0, 0, 0))[0].permute(1, 2, 0).numpy().astype(int)
        assert np.abs(got - np.asarray(want, dtype=int)).max() <= 1, op


def test_affine_ops_follow_pil_s_geometry():
    """A translation by whole pixels is exact, whatever the interpolation; the fill is timm's mean colour."""
    img = photo(np.random.default_rng(4), 20, 20)
    x = torch.from_numpy(img).permute(2, 0, 1)[None]
    got = apply_op("TranslateXRel", x, [0.25], (124, 116, 104))[0].permute(1, 2, 0).numpy()
    want = np.asarray(Image.fromarray(img).transform((20, 20), Image.AFFINE, (1, 0, 5, 0, 1, 0), fillcolor=(124, 116, 104)))
    assert np.array_equal(got, want)


def test_erasing_noise_is_standard_normal_and_keyed():
    a = hash_normal(torch.tensor([1, 2]), (3, 32, 32))
    assert torch.equal(a[1], hash_normal(torch.tensor([2]), (3, 32, 32))[0]) and not torch.equal(a[0], a[1])
    assert abs(a.mean().item()) < 0.05 and abs(a.std().item() - 1) < 0.05 and a.abs().max() < 6.5
    # both normals of each Box-Muller pair are used: still N(0, 1), neighbours uncorrelated, odd sizes too
    from scipy import stats

    many = hash_normal(torch.arange(64) * 7919 + 2**40, (3, 32, 32)).flatten().numpy()
    assert stats.kstest(many, "norm").statistic < 1.95 / math.sqrt(len(many))  # alpha 0.001
    assert abs(np.corrcoef(many[0::2], many[1::2])[0, 1]) < 0.01
    odd = hash_normal(torch.tensor([5, 6]), (3, 5, 5))
    assert odd.shape == (2, 3, 5, 5) and torch.equal(odd[1], hash_normal(torch.tensor([6]), (3, 5, 5))[0])


def test_random_choices_follow_timm_s_deit_recipe():
    """Over many seeds: each of the 15 ops drawn alike, applied half the time at magnitude N(9, 0.5)
    (capped below 10), flips half the time, erasing a quarter of the time, crops inside the image."""
    from trainables.data.gpu.augment import draw_sample

    recipe = DeviceRecipe(224)
    draws = [draw_sample(seed, 375, 500, recipe) for seed in range(3000)]
    applied = [op for d in draws for op, _ in d.ops]
    assert abs(len(applied) / (2 * len(draws)) - 0.5) < 0.03
    counts = np.array([applied.count(op) for op in OPS])
    assert counts.min() > 0.75 * counts.mean() and counts.max() < 1.25 * counts.mean()
    posterize = [arg for d in draws for op, arg in d.ops if op == "PosterizeIncreasing"]
    assert set(posterize) <= {1.0, 2.0} and min(posterize) >= 1  # 4 - int(m / 10 * 4) with m < 10
    assert abs(np.mean([d.flip for d in draws]) - 0.5) < 0.03
    assert abs(np.mean([d.erase is not None for d in draws]) - 0.25) < 0.03
    for d in draws:
        top, left, h, w = d.crop
        assert top >= 0 and top + h <= 375 and left >= 0 and left + w <= 500 and h * w >= 0.07 * 375 * 500


def test_small_and_none_recipes(tmp_path):
    """``small``: crop + flip only (seeded); ``none``: timm's eval resize + centre crop, the same for every seed."""
    image = torch.from_numpy(photo(np.random.default_rng(6), 40, 60)).permute(2, 0, 1).contiguous()
    none = [augment_batch([image], [s], DeviceRecipe(16, "none")) for s in (1, 2)]
    assert torch.equal(none[0], none[1]) and none[0].shape == (1, 3, 16, 16)
    small = [augment_batch([image], [s], DeviceRecipe(16, "small")) for s in (1, 2, 1)]
    assert torch.equal(small[0], small[2]) and not torch.equal(small[0], small[1])
