"""``MJPAlgorithm(draws_ahead=K)``: one sampler call for K batches. Each batch's masks and
permutations are rows of that draw; their distribution is the one-batch-at-a-time sampler's
(statistics against it), and an epoch boundary drops what is left, so a run resumed from an
epoch's checkpoint draws what the uninterrupted run draws."""

import math

import numpy as np
import pytest
import torch

from mjp import MJPConfig, sample_shuffle
from mjp.algorithm import MJPAlgorithm

GRID, PATCH = (14, 14), (16, 16)
IMAGES = torch.zeros(32, 3, 224, 224)


def algorithm(draws_ahead: int, seed: int = 0, **cfg) -> MJPAlgorithm:
    return MJPAlgorithm(MJPConfig(mask_ratio=0.27, **cfg), PATCH, seed=seed, draws_ahead=draws_ahead)


def test_one_draw_ahead_is_the_sampler_called_for_every_batch():
    for mode in ("per_sample", "per_batch"):
        alg, gen = algorithm(1, mask_mode=mode), torch.Generator().manual_seed(0)
        for _ in range(3):
            got = alg.shuffle(IMAGES, 0)
            want = sample_shuffle(32, GRID, 0.27, generator=gen, per_batch=mode == "per_batch")
            assert torch.equal(got.mask, want.mask) and torch.equal(got.perm, want.perm)


def test_k_batches_are_the_rows_of_one_draw_and_the_next_batch_draws_again():
    alg, gen = algorithm(4), torch.Generator().manual_seed(0)
    first, second = (sample_shuffle(4 * 32, GRID, 0.27, generator=gen) for _ in range(2))
    got = [alg.shuffle(IMAGES, 0) for _ in range(5)]
    for i in range(4):
        assert torch.equal(got[i].perm, first.perm[32 * i : 32 * (i + 1)])
    assert torch.equal(got[4].perm, second.perm[:32])
    # the reference code's per-batch mode: one row per batch, shared by its samples
    alg, gen = algorithm(4, mask_mode="per_batch"), torch.Generator().manual_seed(0)
    rows = sample_shuffle(4, GRID, 0.27, generator=gen)
    for i in range(4):
        got = alg.shuffle(IMAGES, 0)
        assert got.perm.shape == (32, 196) and torch.equal(got.perm, rows.perm[i].expand(32, -1))


def test_an_epoch_boundary_drops_the_rest_so_a_resumed_run_draws_the_same():
    straight = algorithm(8)
    for _ in range(3):
        straight.shuffle(IMAGES, 0)
    checkpoint = straight.state_dict()  # the loop checkpoints at an epoch's end
    resumed = algorithm(8, seed=99)
    resumed.load_state_dict(checkpoint)
    for _ in range(10):  # past the next draw too
        assert torch.equal(straight.shuffle(IMAGES, 1).perm, resumed.shuffle(IMAGES, 1).perm)


def test_draws_ahead_below_one_is_refused():
    with pytest.raises(ValueError, match="draws_ahead=0 must be at least 1"):
        algorithm(0)


def features(masks: torch.Tensor, perms: torch.Tensor) -> dict[str, np.ndarray]:
    """Per row: selected count, boundary length (4-neighbour pairs that differ), selected patches
    left in place; per position: how often it is selected."""
    m = masks.view(-1, *GRID)
    boundary = (m[:, 1:] != m[:, :-1]).sum((1, 2)) + (m[:, :, 1:] != m[:, :, :-1]).sum((1, 2))
    stay = ((perms == torch.arange(perms.shape[1])) & masks).sum(1)
    return {"count": masks.sum(1).numpy(), "boundary": boundary.numpy(), "stay": stay.numpy(), "coverage": masks.float().mean(0).numpy()}


def ks_distance(a: np.ndarray, b: np.ndarray) -> float:
    grid = np.sort(np.concatenate([a, b]))
    return float(np.abs(np.searchsorted(np.sort(a), grid, "right") / len(a) - np.searchsorted(np.sort(b), grid, "right") / len(b)).max())


def test_drawn_ahead_batches_have_the_distribution_of_batches_drawn_one_at_a_time():
    """48 batches of 32 each way (1,536 masks): two-sample KS on the rows' boundary length and on the
    selected patches left in place (critical value 1.95 sqrt(2/n), alpha 0.001); per-position
    coverage within 4.5 standard errors; exactly round(196 x 0.27) selected in every row. Batches
    that follow each other within one draw are independent: their overlap is sum_i p_i^2 on average
    (p_i: position i's coverage)."""
    sets = {}
    for k in (1, 8):
        alg = algorithm(k, seed=k)
        drawn = [alg.shuffle(IMAGES, 0) for _ in range(48)]
        sets[k] = features(torch.cat([s.mask for s in drawn]), torch.cat([s.perm for s in drawn]))
        overlap = torch.stack([(a.mask & b.mask).sum(1).float().mean() for a, b in zip(drawn[:-1], drawn[1:])]).mean()
        assert abs(float(overlap) - float((sets[k]["coverage"] ** 2).sum())) < 0.6  # independent rows: sum of p_i^2
    one, ahead = sets[1], sets[8]
    assert set(one["count"]) == set(ahead["count"]) == {53}
    n = len(one["boundary"])
    for name in ("boundary", "stay"):
        assert ks_distance(one[name], ahead[name]) < 1.95 * math.sqrt(2 / n), name
    p = (one["coverage"] + ahead["coverage"]) / 2
    assert np.all(np.abs(one["coverage"] - ahead["coverage"]) < 4.5 * np.sqrt(2 * p * (1 - p) / n))
    # and the test can tell samplers apart: the same count in blocks of at least 8, not 16 (KS 0.14)
    other = MJPAlgorithm(MJPConfig(mask_ratio=0.27, min_block_patches=8), PATCH, seed=3)
    drawn = [other.shuffle(IMAGES, 0) for _ in range(48)]
    changed = features(torch.cat([s.mask for s in drawn]), torch.cat([s.perm for s in drawn]))
    assert ks_distance(one["boundary"], changed["boundary"]) > 1.95 * math.sqrt(2 / n)
