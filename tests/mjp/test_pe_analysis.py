"""Position-embedding analysis with known answers."""

import numpy as np
import pytest
import torch

from mjp import MJPConfig, create_model
from mjp.pe_analysis import (
    cls_attention_maps,
    cosine_similarity_maps,
    explained_variance,
    pca_projection,
    position_regression_mae,
    svd_energy,
)

GRID = (14, 14)


def linear_pe(dim=32, seed=0):
    """A PE that is an affine map of (row, col) and nothing else."""
    rng = np.random.default_rng(seed)
    idx = np.arange(GRID[0] * GRID[1])
    rc = np.stack([idx // GRID[1], idx % GRID[1]], axis=1).astype(float)
    return rc @ rng.normal(size=(2, dim)) + rng.normal(size=dim)


def test_a_linear_pe_is_two_dimensional_and_regresses_its_position_exactly():
    pe = linear_pe()
    ev = explained_variance(pe, [1, 2, 3])
    assert ev[2] == pytest.approx(1.0) and ev[3] == pytest.approx(1.0) and ev[1] < 0.99
    mae = position_regression_mae(pe, GRID)
    assert mae["mae_2d"] < 1e-6 and mae["mae_1d"] < 1e-6


def test_a_random_pe_regresses_no_better_than_predicting_the_mean():
    pe = np.random.default_rng(1).normal(size=(196, 16))
    mae = position_regression_mae(pe, GRID)
    idx = np.arange(196)
    mean_only_2d = np.mean([np.abs(idx // 14 - 6.5).mean(), np.abs(idx % 14 - 6.5).mean()])
    assert mae["mae_2d"] == pytest.approx(mean_only_2d, rel=0.25)
    assert mae["mae_1d"] == pytest.approx(np.abs(idx - 97.5).mean(), rel=0.25)


def test_explained_variance_of_a_timm_pe_grows_to_one_and_energy_is_monotone():
    pe = create_model("vit_tiny_patch16_224", img_size=32, patch_size=4, embed_dim=32, depth=1, num_heads=2).pos_embed[0, 1:]
    ev = explained_variance(pe, range(1, 65))
    values = [ev[k] for k in range(1, 65)]
    assert values == sorted(values) and values[-1] == pytest.approx(1.0)
    energy = svd_energy(pe)
    assert np.all(np.diff(energy) >= -1e-12) and energy[-1] == pytest.approx(1.0)


def test_projection_and_similarity_shapes_and_values():
    pe = linear_pe()
    assert pca_projection(pe).shape == (196, 3)
    maps = cosine_similarity_maps(pe, GRID)
    assert maps.shape == (196, 14, 14) and np.allclose(maps.reshape(196, 196).diagonal(), 1)
    with pytest.raises(ValueError, match="has 100 positions, the PE has 196 rows"):
        cosine_similarity_maps(pe, (10, 10))


def test_cls_attention_maps_equal_the_attention_timm_computes():
    torch.manual_seed(0)
    model = create_model(
        "vit_tiny_patch16_224", mjp=MJPConfig(), img_size=32, patch_size=4, embed_dim=32, depth=2, num_heads=2, num_classes=10
    ).eval()
    images = torch.randn(3, 3, 32, 32)
    ours = cls_attention_maps(model, images)
    attn = model.blocks[-1].attn
    attn.fused_attn = False  # timm's own, non-fused path materialises the weights
    seen = []
    handle = attn.attn_drop.register_forward_hook(lambda m, args, out: seen.append(out))
    model.forward_features(images)
    handle.remove()
    assert ours.shape == (3, 2, 8, 8)
    assert torch.allclose(ours.flatten(2), seen[0][:, :, 0, 1:], atol=1e-6)
