import math

import pytest
import torch

from mjp import MJPConfig
from mjp.dal import DALHead, dal_loss, dal_weight_at, grid_targets, position_weights, top2_subspace
from mjp.jigsaw import sample_shuffle


def linear_grid_pe(grid=(6, 7), dim=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    basis = torch.randn(2, dim, generator=g)
    return grid_targets(grid) @ basis + torch.randn(dim, generator=g)


def test_affine_pca_head_gives_zero_loss_for_a_pe_that_encodes_its_grid_linearly():
    pe = linear_grid_pe()
    assert dal_loss(DALHead("pca", 16, pca_mode="affine"), pe, (6, 7)) < 1e-3


@pytest.mark.parametrize("mode", ["reference", "affine"])
def test_pca_head_loss_is_large_for_a_random_pe(mode):
    assert dal_loss(DALHead("pca", 16, positions=42, pca_mode=mode), torch.randn(42, 16), (6, 7)) > 0.5


def test_reference_pca_directions_are_pca_lowranks_subspace():
    """The reference mode finds the subspace ``torch.pca_lowrank(q=2, niter=5)`` finds (the
    reference code's call) and the exact top-2 one, on rows with a spectral gap, tall (42 x 16)
    and wide (42 x 64); unit columns, largest first."""
    from mjp.dal import reference_pca_directions

    g = torch.Generator().manual_seed(1)
    for d in (16, 64):
        rows = torch.randn(42, d, generator=g) * torch.tensor([6.0, 3.0] + [0.5] * (d - 2))
        weights = torch.full((42,), 1 / 42)
        v = reference_pca_directions(rows, weights, torch.randn(d, 2, generator=g), torch.randn(42, 2, generator=g))
        torch.manual_seed(0)
        _, _, v_lowrank = torch.pca_lowrank(rows, q=2, niter=5)
        exact = torch.linalg.svd(rows - rows.mean(0), full_matrices=False).Vh[:2].T
        for other in (v_lowrank, exact):
            assert torch.allclose(v @ v.T, other @ other.T, atol=1e-4), d
        assert torch.allclose(v.norm(dim=0), torch.ones(2), atol=1e-6), d
        assert torch.allclose((v.T @ exact).abs(), torch.eye(2), atol=1e-4), d  # same order: largest first


def _reference_projection(pe: torch.Tensor, weights: torch.Tensor, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """yhlleo/MJP's ssl_mjp/dlocr.py, plainly: the kept PE patch rows (no CLS), ``_, _, v =
    torch.pca_lowrank(rows, q=2, niter=5)`` from the global RNG seeded with ``seed``, and the
    rows projected on ``v`` uncentred, nothing detached. One mask per batch (``weights`` equal on
    the kept rows) is the reference's call; unequal weights (per-sample masks) are not the
    reference's quantity, and here get pca_lowrank on the weighted, weight-centred rows instead.
    Returns the projection ``[k, 2]`` and the kept rows' indices ``[k]``."""
    kept = (weights > 0).nonzero().squeeze(1)
    rows, w = pe[kept], weights[kept]
    torch.manual_seed(seed)
    if torch.allclose(w, w[0].expand_as(w)):
        _, _, v = torch.pca_lowrank(rows, q=2, niter=5)
    else:
        centred = (rows - (w.unsqueeze(1) * rows).sum(0)) * w.sqrt().unsqueeze(1)
        _, _, v = torch.pca_lowrank(centred, q=2, center=False, niter=5)
    return rows @ v, kept


def _start_of_pca_lowrank(head: DALHead, kept: torch.Tensor, dim: int, seed: int) -> None:
    """Give the head the start ``pca_lowrank`` drew (its first draw): ``[D, 2]`` on a tall matrix
    (``k >= D`` kept rows), ``[k, 2]`` at the kept rows on a wide one (DALHead's docstring)."""
    torch.manual_seed(seed)
    if len(kept) >= dim:
        head.tall_start.copy_(torch.randn(dim, 2))
    else:
        head.wide_start[kept] = torch.randn(len(kept), 2)


@pytest.mark.parametrize(
    "dim, mask_mode, ratio",
    [
        (384, None, 0.0),
        (384, "per_batch", 0.37),
        (384, "per_sample", 0.37),
        (192, None, 0.0),
        (192, "per_batch", 0.27),
        (64, None, 0.0),
        (64, "per_batch", 0.37),
        (64, "per_sample", 0.37),
    ],
)
def test_reference_mode_is_the_reference_codes_loss_and_gradient_given_its_random_start(dim, mask_mode, ratio):
    """Given pca_lowrank's start, the head's projection is the reference's up to each direction's
    sign, and so are the loss (mean L1 against raw integer (row, col)) and its gradient on the PE,
    to float32 noise. 14 x 14 rows of N(0, 1) (a flat spectrum, the reference's initial table,
    where the start matters): D = 384 (DeiT-S: 196 and 123 rows kept, fewer than D: pca_lowrank
    works on the transpose), D = 192 (143 kept: wide; 196: tall), D = 64 (tall); no mask, one
    mask per batch of 8 (``per_batch``, the reference's) and one per sample (``per_sample``: rows
    weighted by their share of kept pairs)."""
    grid = grid_targets((14, 14))
    for seed in range(4):
        g = torch.Generator().manual_seed(seed)
        pe = torch.randn(196, dim, generator=g)
        mask = sample_shuffle(8, (14, 14), ratio, generator=g, per_batch=mask_mode == "per_batch").mask if mask_mode else None
        weights = position_weights(mask, 196, torch.device("cpu"))
        ref_pe, our_pe = pe.clone().requires_grad_(), pe.clone().requires_grad_()
        reference, kept = _reference_projection(ref_pe, weights, seed)
        head = DALHead("pca", dim, positions=196, seed=seed + 10)
        _start_of_pca_lowrank(head, kept, dim, seed)
        ours = head(our_pe, grid, weights)[kept]
        signs = torch.sign((reference * ours).sum(0)).detach()  # each direction's sign is arbitrary in both
        reference_loss = ((reference - grid[kept]).abs().mean(1) * weights[kept]).sum()  # the mean L1 with equal weights
        our_loss = ((ours * signs - grid[kept]).abs().mean(1) * weights[kept]).sum()
        reference_loss.backward()
        our_loss.backward()
        assert torch.allclose(our_loss, reference_loss, rtol=1e-5), seed
        assert (our_pe.grad - ref_pe.grad).norm() < 1e-3 * ref_pe.grad.norm(), seed


def test_reference_pca_head_compares_the_uncentred_projection_with_the_grid():
    """The reference's loss: L1 between (row, col) and the PE rows projected on the directions,
    without an affine fit. A PE that is exactly the grid in two coordinates gives 0 (up to the
    directions' signs; rows spread more than columns on a 7 x 6 grid, so the first direction is the
    row's); shifted by a constant, it does not (the affine mode absorbs the shift)."""
    from mjp.dal import reference_pca_directions

    grid = grid_targets((7, 6))
    pe = torch.cat([grid, torch.zeros(42, 14)], dim=1)
    head = DALHead("pca", 16, positions=42, seed=3)
    weights = torch.full((42,), 1 / 42)
    directions = reference_pca_directions(pe, weights, head.tall_start, head.wide_start)
    assert torch.allclose(head(pe, grid, weights), pe @ directions)
    assert torch.allclose((pe @ directions).abs(), grid, atol=1e-4)
    shifted = pe + 5.0
    assert dal_loss(head, shifted, (7, 6)) > 1.0 and dal_loss(DALHead("pca", 16, pca_mode="affine"), shifted, (7, 6)) < 1e-3
    # The start comes from the seed: one loss per PE and seed, as a resumed run recomputes it.
    again, other = DALHead("pca", 16, positions=42, seed=3), DALHead("pca", 16, positions=42, seed=4)
    for start in ("tall_start", "wide_start"):
        assert torch.equal(getattr(again, start), getattr(head, start)) and not torch.equal(getattr(other, start), getattr(head, start))
    with pytest.raises(ValueError, match="needs positions >= 1"):
        DALHead("pca", 16)
    with pytest.raises(ValueError, match="built for 42 PE rows, got 40"):
        head(pe[:40], grid[:40], weights[:40])


def test_row_h_runs_the_reference_pca_head_by_default():
    assert MJPConfig.variant("H").dal_pca == "reference" and MJPConfig.variant("H", dal_pca="affine").dal_pca == "affine"
    with pytest.raises(ValueError, match="pca mode 'svd'"):
        DALHead("pca", 4, pca_mode="svd")


@pytest.mark.parametrize("kind", ["linear", "mlp"])
def test_learned_heads_fit_a_linear_pe(kind):
    torch.manual_seed(0)
    pe, head = linear_grid_pe(), DALHead(kind, 16, positions=42)
    opt = torch.optim.Adam(head.parameters(), lr=0.03)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, 1000)
    for _ in range(1000):
        opt.zero_grad()
        loss = dal_loss(head, pe, (6, 7))
        loss.backward()
        opt.step()
        sched.step()
    assert loss < 0.05


def test_dal_gradient_flows_into_the_pe():
    pe = torch.randn(42, 16, requires_grad=True)
    dal_loss(DALHead("pca", 16, positions=42), pe, (6, 7)).backward()
    assert pe.grad.abs().sum() > 0


def test_shuffled_rows_are_left_out():
    mask = torch.zeros(3, 4, dtype=torch.bool)
    mask[:, 1] = True
    mask[0, 2] = True
    w = position_weights(mask, 4, torch.device("cpu"))
    assert w[1] == 0 and torch.isclose(w.sum(), torch.tensor(1.0))
    assert torch.allclose(w, torch.tensor([3, 0, 2, 3]) / 8)
    assert position_weights(torch.ones(2, 4, dtype=torch.bool), 4, torch.device("cpu")).sum() == 0


def test_grid_targets_are_row_major_row_col():
    assert grid_targets((2, 3)).tolist() == [[0, 0], [0, 1], [0, 2], [1, 0], [1, 1], [1, 2]]


def test_weight_schedules():
    const = MJPConfig(dal_weight=0.01)
    assert dal_weight_at(const, 0.0) == dal_weight_at(const, 0.7) == 0.01
    ref = MJPConfig(dal_weight=0.01, dal_schedule="warmup_cosine", dal_final_weight=0.005)
    assert dal_weight_at(ref, 0.0, warmup=0.1) == 0
    assert math.isclose(dal_weight_at(ref, 0.05, warmup=0.1), 0.005)
    assert math.isclose(dal_weight_at(ref, 0.1, warmup=0.1), 0.01)
    assert math.isclose(dal_weight_at(ref, 1.0, warmup=0.1), 0.005)
    assert dal_weight_at(MJPConfig.variant("G"), 0.5) == 0.0


def test_unknown_head_is_named():
    with pytest.raises(ValueError, match="unknown DAL head 'svm'"):
        DALHead("svm", 4)


def rows_shuffled_everywhere(n=42, b=5, cols=(3, 10, 11)):
    mask = torch.zeros(b, n, dtype=torch.bool)
    mask[:, list(cols)] = True
    return mask


@pytest.mark.parametrize("kind", ["pca", "linear", "mlp"])
def test_a_row_shuffled_in_every_sample_gets_no_dal_gradient(kind):
    torch.manual_seed(0)
    pe = torch.randn(42, 16, requires_grad=True)
    dal_loss(DALHead(kind, 16, positions=42), pe, (6, 7), rows_shuffled_everywhere()).backward()
    assert (pe.grad[[3, 10, 11]] == 0).all() and pe.grad.abs().sum() > 0


def test_pca_head_fits_only_unshuffled_rows():
    """A PE linear in the grid except on shuffled rows: loss 0 when those rows are left out."""
    pe = linear_grid_pe()
    pe[[3, 10, 11]] = torch.randn(3, 16) * 50  # rows the batch shuffled everywhere: garbage
    mask = rows_shuffled_everywhere()
    assert dal_loss(DALHead("pca", 16, pca_mode="affine"), pe, (6, 7), mask) < 1e-3
    assert dal_loss(DALHead("pca", 16, pca_mode="affine"), pe, (6, 7)) > 0.5  # the same rows counted spoil the fit


def test_pca_subspace_matches_the_svd():
    from mjp.dal import top2_subspace

    g = torch.Generator().manual_seed(3)
    x = torch.randn(60, 24, generator=g) @ torch.diag(torch.linspace(5, 0.1, 24))
    x = x - x.mean(0)
    q = top2_subspace(x, torch.full((60,), 1 / 60))
    v = torch.linalg.svd(x, full_matrices=False).Vh[:2].T
    assert torch.allclose(q @ q.T, v @ v.T, atol=1e-4)  # the same subspace


def _angle_degrees(q: torch.Tensor, v: torch.Tensor) -> float:
    """Largest principal angle between the spans of two orthonormal ``[D, 2]`` bases (from its sine,
    which, unlike the cosine, resolves small angles)."""
    q, v = q.double(), v.double()
    sines = torch.linalg.svdvals(q - v @ (v.T @ q)).clamp(max=1.0)
    return math.degrees(math.asin(sines.max().item()))


@pytest.mark.parametrize("n, d", [(196, 384), (64, 32)], ids=["N < D (DeiT-S)", "N > D"])
def test_pca_head_subspace_is_exact_on_a_flat_spectrum_at_initialisation(n, d):
    """A PE at initialisation (trunc-normal rows): s1..s4 nearly equal. The pca head's subspace is the
    exact SVD's (16 subspace iterations left it 40 degrees off)."""
    g = torch.Generator().manual_seed(0)
    u, _ = torch.linalg.qr(torch.randn(n, d, generator=g, dtype=torch.float64))
    v, _ = torch.linalg.qr(torch.randn(d, d, generator=g, dtype=torch.float64))
    k = min(n, d)
    spectrum = torch.linspace(0.66, 0.3, k, dtype=torch.float64)
    spectrum[1] = 0.66 * 0.995  # s1 ~ s2, s2 / s3 ~ 1.01: a gap, but a small one
    rows = (u[:, :k] * spectrum) @ v[:, :k].T
    rows = (rows - rows.mean(0)).float()
    q = top2_subspace(rows, torch.full((n,), 1 / n))
    exact = torch.linalg.svd(rows.double(), full_matrices=False).Vh[:2].T
    assert _angle_degrees(q, exact) < 0.5


def test_pca_head_subspace_is_exact_on_a_decaying_spectrum():
    """A trained-like PE: a steep spectrum (s1 / s2 = 4): deflation keeps the second direction."""
    g = torch.Generator().manual_seed(1)
    x = torch.randn(196, 48, generator=g) @ torch.diag(torch.logspace(1, -2, 48))
    x = x - x.mean(0)
    q = top2_subspace(x, torch.full((196,), 1 / 196))
    assert _angle_degrees(q, torch.linalg.svd(x.double(), full_matrices=False).Vh[:2].T) < 0.01
