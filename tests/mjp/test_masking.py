import pytest
import torch

from mjp import sample_block_masks
from mjp.masking import target_count


@pytest.mark.parametrize("grid", [14, (7, 9), 4, (1, 10)])
@pytest.mark.parametrize("ratio", [0.0, 0.01, 0.03, 0.1, 0.27, 0.5, 0.9, 1.0])
def test_every_row_selects_exactly_round_n_ratio(grid, ratio, gen):
    masks = sample_block_masks(32, grid, ratio, generator=gen)
    n = grid * grid if isinstance(grid, int) else grid[0] * grid[1]
    assert masks.shape == (32, n) and masks.dtype == torch.bool
    assert (masks.sum(1) == round(n * ratio)).all()


def test_same_seed_same_masks_and_other_seed_other_masks():
    a = sample_block_masks(16, 14, 0.27, generator=torch.Generator().manual_seed(7))
    b = sample_block_masks(16, 14, 0.27, generator=torch.Generator().manual_seed(7))
    c = sample_block_masks(16, 14, 0.27, generator=torch.Generator().manual_seed(8))
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_global_rng_is_neither_used_nor_needed(gen):
    torch.manual_seed(0)
    before = torch.get_rng_state()
    sample_block_masks(8, 14, 0.3, generator=gen)
    assert torch.equal(before, torch.get_rng_state())


def test_samples_get_independent_masks(gen):
    masks = sample_block_masks(64, 14, 0.27, generator=gen)
    assert len({tuple(row.tolist()) for row in masks}) == 64
    # Every position is reachable. Rectangles cover the centre more often than the corners (as
    # BEiT's do): a corner is selected in a few percent of samples, the centre in about half.
    many = sample_block_masks(1024, 14, 0.27, generator=gen)
    assert many.any(0).all()


def test_masks_are_blocky(gen):
    """Selected patches come in blocks: nearly all have a selected 4-neighbour (random would give ~50%)."""
    masks = sample_block_masks(256, 14, 0.27, generator=gen).view(-1, 14, 14).float()
    neighbours = torch.nn.functional.conv2d(masks[:, None], torch.tensor([[[[0, 1, 0], [1, 0, 1], [0, 1, 0]]]]).float(), padding=1)[:, 0]
    has_neighbour = ((neighbours > 0) & (masks > 0)).sum() / masks.sum()
    assert has_neighbour > 0.97


def test_blocks_respect_min_size_when_target_allows(gen):
    """At ratio 0.27 on 14x14 (53 patches), nearly all selected patches lie in connected groups of >= 4."""
    from scipy.ndimage import label

    masks = sample_block_masks(64, 14, 0.27, generator=gen).view(-1, 14, 14).numpy()
    small = 0
    for m in masks:
        labels, count = label(m)
        sizes = [(labels == i).sum() for i in range(1, count + 1)]
        small += sum(s for s in sizes if s < 4)
    assert small / masks.sum() < 0.02


def test_target_count_is_python_round():
    assert target_count(196, 0.27) == 53 and target_count(196, 0.03) == 6 and target_count(16, 0.5) == 8


@pytest.mark.parametrize("ratio", [-0.1, 1.5, float("nan")])
def test_bad_ratio_is_named(ratio):
    with pytest.raises(ValueError, match="ratio"):
        sample_block_masks(2, 4, ratio)


def test_output_device_follows_request(gen):
    masks = sample_block_masks(2, 4, 0.5, generator=gen, device="meta")
    assert masks.device.type == "meta"


class _CountOps(torch.utils._python_dispatch.TorchDispatchMode):
    """Counts the aten ops a call dispatches (each one a kernel launch, or more, on a GPU)."""

    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.count += 1
        return func(*args, **(kwargs or {}))


def test_sample_shuffle_runs_a_small_constant_number_of_ops():
    """No Python loop over rounds: the same op count whatever the batch, ratio, square grid and min block (<= 80)."""
    from mjp import sample_shuffle

    counts = {}
    cases = [
        (64, 0.27, (14, 14), 16),
        (256, 0.1, (14, 14), 16),
        (256, 0.27, (14, 14), 16),
        (256, 0.5, (14, 14), 16),
        (256, 0.27, (24, 24), 16),
    ]
    cases += [(64, 0.03, (24, 24), 16), (32, 0.1, (7, 7), 16), (32, 0.5, (16, 16), 8), (32, 0.27, (14, 14), 1)]
    for batch, ratio, grid, min_block in cases:
        sample_shuffle(batch, grid, ratio, generator=torch.Generator().manual_seed(0), min_block=min_block)  # per-grid constants made once
        with _CountOps() as ops:
            s = sample_shuffle(batch, grid, ratio, generator=torch.Generator().manual_seed(0), min_block=min_block)
        counts[(batch, ratio, grid, min_block)] = ops.count
        assert (s.mask.sum(1) == target_count(grid[0] * grid[1], ratio)).all()
    assert len(set(counts.values())) == 1 and max(counts.values()) <= 80, counts


@pytest.mark.parametrize(
    "n, ratio, ok", [(16, 0.0, True), (16, 0.01, False), (16, 0.09, False), (16, 0.0938, True), (196, 0.005, False), (196, 0.01, True)]
)
def test_one_rule_for_ratios_on_a_grid_zero_or_two_patches(n, ratio, ok):
    from mjp.masking import check_grid_ratio, smallest_ratio

    if ok:
        check_grid_ratio("mjp.mask_ratio", ratio, n)
    else:
        with pytest.raises(ValueError, match=rf"mjp.mask_ratio={ratio} selects .* allowed: 0 \(no shuffle\) or >= {smallest_ratio(n)}"):
            check_grid_ratio("mjp.mask_ratio", ratio, n)
    assert target_count(n, smallest_ratio(n)) == 2


def test_the_top_up_point_stays_inside_a_thin_grid():
    """The inset grows with the deficit; on a grid 2 patches high it is capped at half the side, so
    the point the top-up grows towards is always on the grid."""
    from mjp.masking import DEFAULT_ASPECT_RATIO, TRIES, _constants, _top_up_point

    c = _constants(2, 32, 4, TRIES, 16, DEFAULT_ASPECT_RATIO, torch.device("cpu"))
    blocks = torch.zeros(256, 1, 2, 32)  # nothing placed: the deficit is all of k = 32
    point = _top_up_point(blocks, 32, c, torch.Generator().manual_seed(0), torch.device("cpu"))
    assert (point[:, 0] >= 0).all() and (point[:, 0] <= 2).all() and (point[:, 1] >= 0).all() and (point[:, 1] <= 32).all()
    assert point[:, 1].min() > 2 and point[:, 1].max() < 30  # the long side keeps its inset: 0.4 sqrt(32) = 2.3
