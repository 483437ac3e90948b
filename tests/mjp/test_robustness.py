"""Robustness measures with known answers: mCE arithmetic, AURRA/AUPR, corruptions, class subsets."""

from pathlib import Path

import numpy as np
import pytest
import torch
from sklearn.metrics import average_precision_score

from mjp.robustness import ALEXNET_ERRORS, CORRUPTIONS, aupr_ood, aurra, class_subset_indices, corrupt, mce


def test_the_fifteen_corruptions_in_imagecorruptions_spelling():
    from imagecorruptions import get_corruption_names

    assert tuple(get_corruption_names("common")) == CORRUPTIONS and len(CORRUPTIONS) == 15


def test_mce_unnormalised_is_the_mean_error_in_percent():
    errors = {"gaussian_noise": [0.1, 0.2, 0.3, 0.4, 0.5], "fog": [0.2] * 5}
    assert mce(errors, baseline=None) == pytest.approx(100 * (0.3 + 0.2) / 2)


def test_mce_normalised_by_alexnet_divides_each_corruption_by_alexnet_s_error():
    errors = {"gaussian_noise": [0.886428] * 5, "brightness": [0.564592 / 2] * 5}
    assert mce(errors) == pytest.approx(100 * (1.0 + 0.5) / 2)
    assert ALEXNET_ERRORS["jpeg_compression"] == 0.6065


def test_mce_relative_to_a_baseline_run():
    ours = {"fog": [0.2] * 5, "contrast": [0.3] * 5}
    base = {"fog": [0.4] * 5, "contrast": [0.3] * 5}
    assert mce(ours, baseline=base) == pytest.approx(100 * (0.5 + 1.0) / 2)


@pytest.mark.parametrize(
    "errors, baseline, message",
    [
        ({}, None, "no corruption errors"),
        ({"fog": [0.1] * 4}, None, "one per severity 1..5"),
        ({"fog": [0.1] * 5}, "resnet", "allowed: 'alexnet', None"),
        ({"speckle_noise": [0.1] * 5}, "alexnet", "no AlexNet error for 'speckle_noise'"),
    ],
)
def test_mce_rejects_what_it_cannot_compute(errors, baseline, message):
    with pytest.raises(ValueError, match=message):
        mce(errors, baseline)


def test_aurra_is_the_mean_accuracy_of_the_k_most_confident():
    confidence = np.array([0.9, 0.8, 0.7, 0.6])
    correct = np.array([1, 0, 1, 1])
    expected = np.mean([1 / 1, 1 / 2, 2 / 3, 3 / 4])
    assert aurra(confidence, correct) == pytest.approx(expected)
    assert aurra(confidence, np.ones(4)) == 1.0


def test_aupr_treats_the_out_of_distribution_set_as_positive_scored_by_low_confidence():
    rng = np.random.default_rng(0)
    conf_in, conf_out = rng.uniform(0.5, 1, 50), rng.uniform(0, 0.7, 30)
    labels = np.r_[np.ones(30), np.zeros(50)]
    assert aupr_ood(conf_in, conf_out) == pytest.approx(average_precision_score(labels, -np.r_[conf_out, conf_in]))
    assert aupr_ood(np.ones(5), np.zeros(5)) == 1.0


def test_class_subsets_match_timm_s_imagenet_a_and_r_lists():
    import timm.data

    info = Path(timm.data.__file__).parent / "_info"
    for name in ("imagenet_a", "imagenet_r"):
        wnids = (info / f"{name}_synsets.txt").read_text().split()
        indices = [int(i) for i in (info / f"{name}_indices.txt").read_text().split()]
        assert class_subset_indices(wnids) == indices
    with pytest.raises(ValueError, match="are not ImageNet-1K wnids"):
        class_subset_indices(["cat"])


@pytest.mark.parametrize("channels, size", [(1, 8), (1, 28), (3, 28)])
def test_every_corruption_runs_on_small_grey_and_colour_images_deterministically(channels, size):
    images = torch.rand(2, channels, size, size, generator=torch.Generator().manual_seed(0))
    state = np.random.get_state()
    for name in CORRUPTIONS:
        out = corrupt(images, name, 3, seed=5)
        assert out.shape == images.shape and out.dtype == images.dtype and out.min() >= 0 and out.max() <= 1, name
        assert torch.equal(out, corrupt(images, name, 3, seed=5)), f"{name}: the same seed gave another image"
    assert np.array_equal(np.random.get_state()[1], state[1])  # the caller's global numpy stream is untouched


def test_severity_and_seed_change_the_noise():
    images = torch.full((1, 3, 28, 28), 0.5)
    a = corrupt(images, "gaussian_noise", 1, seed=0)
    assert not torch.equal(a, corrupt(images, "gaussian_noise", 1, seed=1))
    assert (corrupt(images, "gaussian_noise", 5, seed=0) - 0.5).abs().mean() > (a - 0.5).abs().mean()


@pytest.mark.parametrize("bad, message", [(dict(corruption="rain"), "unknown corruption 'rain'"), (dict(severity=6), "allowed: 1..5")])
def test_bad_corruption_arguments_are_named(bad, message):
    args = dict(corruption="fog", severity=1) | bad
    with pytest.raises(ValueError, match=message):
        corrupt(torch.rand(1, 3, 8, 8), args["corruption"], args["severity"], seed=0)


@pytest.mark.parametrize("corruption", ["gaussian_noise", "shot_noise", "impulse_noise"])
def test_noise_on_a_grey_image_is_as_strong_as_on_rgb(corruption):
    """A grey image is corrupted as an RGB one with equal channels: its noise has RGB's strength
    (averaging three independent channels back to one divided it by sqrt(3))."""
    grey = torch.full((16, 1, 32, 32), 0.5)
    rgb = grey.expand(-1, 3, -1, -1).contiguous()
    noise_grey = (corrupt(grey, corruption, 3, seed=0) - grey).std().item()
    noise_rgb = (corrupt(rgb, corruption, 3, seed=0) - rgb).std().item()
    assert noise_grey == pytest.approx(noise_rgb, rel=0.1)
