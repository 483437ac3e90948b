import pytest
import torch
from torch import nn

from mjp import jigsaw_permutation, sample_block_masks, sample_shuffle, shuffle_image_patches, shuffle_tokens
from mjp.jigsaw import pixel_orders, shuffle_pixels_within_patches
from tests.default_dtype import default_dtype


def test_only_selected_positions_move(gen):
    mask = sample_block_masks(32, 14, 0.27, generator=gen)
    perm = jigsaw_permutation(mask, generator=gen)
    ident = torch.arange(196).expand(32, 196)
    assert torch.equal(perm[~mask], ident[~mask])
    assert torch.equal(perm.sort(1).values, ident)  # a permutation
    assert mask.gather(1, perm)[mask].all()  # selected slots receive selected tokens
    assert (perm[mask] != ident[mask]).float().mean() > 0.9  # and they do move


def test_rows_with_different_counts(gen):
    mask = torch.zeros(3, 10, dtype=torch.bool)
    mask[0, [1, 4, 7]] = True
    mask[2] = True
    perm = jigsaw_permutation(mask, generator=gen)
    assert torch.equal(perm[1], torch.arange(10))
    assert set(perm[0, [1, 4, 7]].tolist()) == {1, 4, 7}
    assert sorted(perm[2].tolist()) == list(range(10))


def test_shuffle_tokens_round_trip_with_inverse(gen):
    s = sample_shuffle(4, (6, 5), 0.5, generator=gen)
    tokens = torch.randn(4, 30, 8)
    mixed = shuffle_tokens(tokens, s.perm)
    assert torch.equal(shuffle_tokens(mixed, s.perm.argsort(1)), tokens)
    assert torch.equal(mixed[~s.mask], tokens[~s.mask])


def test_token_shuffle_equals_pixel_patch_shuffle_for_conv_patch_embed(gen):
    embed = nn.Conv2d(3, 16, kernel_size=4, stride=4)
    images = torch.randn(2, 3, 24, 32)
    s = sample_shuffle(2, (6, 8), 0.4, generator=gen)
    tokens = embed(images).flatten(2).transpose(1, 2)
    via_tokens = shuffle_tokens(tokens, s.perm)
    via_pixels = embed(shuffle_image_patches(images, s.perm, 4)).flatten(2).transpose(1, 2)
    torch.testing.assert_close(via_tokens, via_pixels)


def test_spp_pixel_shuffle_keeps_pixels_inside_their_patch(gen):
    images = torch.arange(2 * 3 * 8 * 8, dtype=torch.float).view(2, 3, 8, 8)
    mask = torch.tensor([[True, False, False, True], [False, False, False, False]])
    out = shuffle_pixels_within_patches(images, mask, 4, generator=gen)
    assert torch.equal(out[1], images[1])
    for b, p in [(0, 0), (0, 1), (0, 3)]:
        r, c = divmod(p, 2)
        a = images[b, :, 4 * r : 4 * r + 4, 4 * c : 4 * c + 4].reshape(3, -1)
        z = out[b, :, 4 * r : 4 * r + 4, 4 * c : 4 * c + 4].reshape(3, -1)
        assert torch.equal(a.sort(1).values, z.sort(1).values)
        assert torch.equal(a, z) == (not mask[b, p].item())
        # channel c holds channel 0 plus a constant, so equal offsets mean the same order on every channel
        assert torch.equal(z - z[0:1], a - a[0:1])


def test_per_batch_mode_shares_one_shuffle(gen):
    s = sample_shuffle(5, (4, 4), 0.5, generator=gen, per_batch=True)
    assert (s.mask == s.mask[0]).all() and (s.perm == s.perm[0]).all() and s.mask[0].sum() == 8


def test_apply_prob_zero_never_shuffles_and_half_shuffles_some(gen):
    never = sample_shuffle(64, (4, 4), 0.5, generator=gen, apply_prob=0.0)
    assert not never.mask.any() and torch.equal(never.perm, torch.arange(16).expand(64, 16))
    half = sample_shuffle(400, (4, 4), 0.5, generator=gen, apply_prob=0.5)
    assert 0.35 < half.mask.any(1).float().mean() < 0.65


def test_image_size_not_divisible_is_an_error(gen):
    with pytest.raises(ValueError, match="not divisible"):
        shuffle_image_patches(torch.zeros(1, 3, 10, 10), torch.zeros(1, 4, dtype=torch.long), 4)


def test_bad_mask_is_an_error():
    with pytest.raises(ValueError, match="bool tensor"):
        jigsaw_permutation(torch.zeros(2, 3))


def test_reference_spp_shares_one_pixel_order_across_all_patches(gen):
    x = torch.arange(2 * 1 * 8 * 8, dtype=torch.float32).reshape(2, 1, 8, 8)
    mask = torch.ones(2, 4, dtype=torch.bool)
    out = shuffle_pixels_within_patches(x, mask, 4, generator=gen, shared=True)
    before = x.reshape(2, 1, 2, 4, 2, 4).permute(0, 2, 4, 1, 3, 5).reshape(2, 4, 16)
    after = out.reshape(2, 1, 2, 4, 2, 4).permute(0, 2, 4, 1, 3, 5).reshape(2, 4, 16)
    order = (after[0, 0:1] == before[0, 0].unsqueeze(1)).float().argmax(0)  # where each pixel came from
    for b in range(2):
        for p in range(4):
            assert torch.equal(after[b, p], before[b, p][order])  # the same order in every patch and image
    assert not torch.equal(order, torch.arange(16))


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
def test_a_seed_draws_the_same_shuffle_whatever_torchs_default_dtype(dtype):
    """Masks, permutations, pixel orders and the apply draw are made in float32 whatever the
    default dtype: a float64 run (tests/trainables/train/test_ddp_equivalence.py) gets the
    masks a float32 run gets from the same seed (before: a dtype error in the top-up)."""

    def draw():
        g = torch.Generator().manual_seed(3)
        s = sample_shuffle(8, (7, 9), 0.4, generator=g, apply_prob=0.75, min_block=4)
        return s.mask, s.perm, pixel_orders(s.mask, 2, generator=g)

    want = draw()
    with default_dtype(dtype):
        got = draw()
    for a, b in zip(want, got, strict=True):
        assert torch.equal(a, b)
