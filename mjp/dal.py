"""Dense Absolute Localization (DAL, paper Eq. 1-2): regress each PE row to its (row, col) on the grid.

``L_DAL = mean over unshuffled positions of |(i, j) - g(E_pos[i, j])|_1`` with raw integer targets,
as the paper and the reference code. Rows are weighted by their share of the batch's unshuffled
(sample, position) pairs (``position_weights``), so a position shuffled in every sample of the
batch is left out and gets no DAL gradient. Heads ``g``:

- ``linear``: ``Linear(D, 2)``; ``mlp``: ``Linear(D, D) - ReLU - Linear(D, 2)`` (the paper's NLN);
- ``pca``: no parameters; two modes (``MJPConfig.dal_pca``):
  ``reference`` (the default; the reference code's ``ssl_mjp/dlocr.py``, the paper's row H): the PE
  rows are projected, uncentred, on two principal directions found as ``torch.pca_lowrank(q=2,
  niter=5)`` finds them (``REFERENCE_PCA_ITERATIONS`` subspace iterations from a random start, on
  the kept rows when there are at least ``D`` of them, on their transpose when fewer), and the
  projection is compared with (row, col) directly, whatever the directions' signs and order;
  ``affine`` (ours): the exact top-2 directions, then a closed-form weighted least-squares affine
  map from the projection to (row, col): the loss is then how far the PE is from laying out its
  grid in a 2-D linear subspace, free of the arbitrary orientation.

The affine mode's directions are exact (to float64 precision) whenever the spectrum separates its
second and third singular values, early in training too, where a PE at initialisation has a flat
spectrum (s1..s4 = 0.66, 0.66, 0.65, 0.64 on DeiT-S): a fixed count of subspace iterations left
that subspace 40 degrees off. ``top2_subspace`` runs the power method with repeated squaring
(``2 ** PCA_SQUARINGS`` power steps in ``PCA_SQUARINGS`` products) on the small Gram matrix, one
direction at a time with the first deflated. It uses no random draws (the reference's
``torch.pca_lowrank`` uses the global RNG) and no host synchronisation (``torch.linalg.svd``,
``eigh`` and ``solve`` check their results on the host under CUDA). Gradients flow through the
projection, the mean and the affine fit, not through the directions.

The reference mode draws its starts once, from the run's seed (``DALHead``), where the reference
draws a fresh one per call from the global RNG: the loss is then a function of the PE alone, and a
resumed run computes the same one. Its start lies where ``pca_lowrank``'s does: ``[D, 2]`` when
the ``k`` kept rows are at least ``D`` (tall), ``[k, 2]`` on the kept rows when fewer (wide: DeiT-S
keeps 196 or fewer rows of ``D = 384``; ``pca_lowrank`` then works on the transpose). ``k`` is
read on the device, Gram-Schmidt stands in for QR and a closed-form 2 x 2 eigen-decomposition for
the small SVD, so no step syncs with the host. As in the reference, the gradient flows through the
directions too (the reference differentiates through ``pca_lowrank``); given the reference's start,
its loss and gradient are ours to float32 noise, up to the directions' signs, in both shapes
(``tests/mjp/test_dal.py`` against a plain re-implementation). That holds for one mask per batch
(``mask_mode: per_batch``, the reference's); with ``per_sample`` masks the PCA weights each row by
its share of kept (sample, position) pairs, a different quantity from the reference's. The affine
mode stops the gradient at its directions.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from mjp.config import MJPConfig

#: squarings per direction in ``top2_subspace``: 2**12 power steps, enough for a 0.65 / 0.66 gap
PCA_SQUARINGS = 12
#: subspace iterations of the reference mode (``torch.pca_lowrank``'s ``niter=5`` in the reference)
REFERENCE_PCA_ITERATIONS = 5


def grid_targets(grid: tuple[int, int], device: torch.device | None = None) -> torch.Tensor:
    """(row, col) of every position of a row-major ``H x W`` grid: float ``[H * W, 2]``."""
    h, w = grid
    idx = torch.arange(h * w, device=device)
    return torch.stack([idx // w, idx % w], dim=1).float()


def _orthonormal(q: torch.Tensor) -> torch.Tensor:
    """Gram-Schmidt on the two columns of ``q [D, 2]`` (no host sync; degenerate columns stay ~0)."""
    a = q[:, 0] / q[:, 0].norm().clamp_min(1e-12)
    b = q[:, 1] - (a @ q[:, 1]) * a
    return torch.stack([a, b / b.norm().clamp_min(1e-12)], dim=1)


def _top_eigenvector(sym: torch.Tensor, squarings: int) -> torch.Tensor:
    """Unit top eigenvector ``[M]`` of a symmetric PSD ``sym [M, M]``: ``sym ** (2 ** squarings)``
    (trace-normalised at every squaring) is ~ ``v v^T``; its largest-diagonal column is ~ ``v``."""
    power = sym / sym.diagonal().sum().clamp_min(1e-300)
    for _ in range(squarings):
        power = power @ power
        power = power / power.diagonal().sum().clamp_min(1e-300)
    column = power.gather(1, power.diagonal().argmax().view(1, 1).expand(power.shape[0], 1)).squeeze(1)
    return column / column.norm().clamp_min(1e-300)


def top2_subspace(rows: torch.Tensor, weights: torch.Tensor, squarings: int = PCA_SQUARINGS) -> torch.Tensor:
    """An orthonormal basis ``[D, 2]`` of the top-2 principal subspace of the weighted rows.

    ``rows [N, D]`` (centred), ``weights [N]`` (>= 0). The power method with repeated squaring
    runs in float64 on the smaller of the two Gram matrices (``N x N`` or ``D x D``): the top
    direction, then the top direction with the first projected out. The basis' orientation inside
    the subspace is arbitrary: the head's affine fit does not depend on it.
    """
    y = rows.double() * weights.double().clamp_min(0).sqrt().unsqueeze(1)  # [N, D]
    small_side = y.shape[0] <= y.shape[1]
    gram = y @ y.T if small_side else y.T @ y  # [M, M], M = min(N, D)
    first = _top_eigenvector(gram, squarings)
    away = torch.eye(gram.shape[0], dtype=gram.dtype, device=gram.device) - first.outer(first)
    second = _top_eigenvector(away @ gram @ away, squarings)
    basis = torch.stack([first, second], dim=1)  # [M, 2]
    if small_side:  # an eigenvector a of Y Y^T gives the direction Y^T a of Y^T Y
        basis = y.T @ basis
    return _orthonormal(basis).to(rows.dtype)


def _range_basis(m: torch.Tensor, start: torch.Tensor, iterations: int) -> torch.Tensor:
    """Orthonormal basis ``[M, 2]`` of ``m [M, K]``'s top-2 range from ``start [K, 2]``:
    ``Q = orth(m R)``, then ``iterations`` times ``Q = orth(m orth(m^T Q))`` (Halko et al.'s
    Algorithm 4.4, ``torch.pca_lowrank``'s basis; Gram-Schmidt stands in for its QR)."""
    q = _orthonormal(m @ start)
    for _ in range(iterations):
        q = _orthonormal(m @ _orthonormal(m.T @ q))
    return q


def _top2_rotation(b: torch.Tensor) -> torch.Tensor:
    """The left singular vectors ``[2, 2]`` (columns, larger singular value first) of ``b [2, K]``,
    from the closed-form eigen-decomposition of ``b b^T`` (a rotation; no host sync)."""
    bbt = b @ b.T
    angle = 0.5 * torch.atan2(2 * bbt[0, 1], bbt[0, 0] - bbt[1, 1])  # the larger eigenvalue's axis
    cos, sin = angle.cos(), angle.sin()
    return torch.stack([torch.stack([cos, -sin]), torch.stack([sin, cos])])


def reference_pca_directions(
    rows: torch.Tensor,
    weights: torch.Tensor,
    tall_start: torch.Tensor,
    wide_start: torch.Tensor,
    iterations: int = REFERENCE_PCA_ITERATIONS,
) -> torch.Tensor:
    """Two principal directions ``[D, 2]`` of the weighted rows, as ``torch.pca_lowrank(q=2)`` finds them.

    ``rows [N, D]`` (centred here, with ``weights [N]``; rows of weight 0 are left out). As
    ``pca_lowrank``, on the ``k`` kept rows: when ``k >= D`` (tall), the basis ``Q [N, 2]`` of
    ``A``'s range grows from ``tall_start [D, 2]`` and the directions are the right singular
    vectors of ``Q^T A [2, D]``; when ``k < D`` (wide), ``A^T`` is the matrix, ``Q [D, 2]``
    grows from ``wide_start [N, 2]`` (its kept rows are the start: ``pca_lowrank``'s
    ``randn(k, 2)``) and the directions are ``Q`` times the left singular vectors of
    ``Q^T A^T [2, N]``. ``k`` is read on the device (no host sync): when ``N >= D`` both recipes
    run and ``k`` picks one. Unit columns, largest first; their signs are arbitrary, as the
    reference's.
    """
    a = (rows - (weights.unsqueeze(1) * rows).sum(0, keepdim=True)) * weights.clamp_min(0).sqrt().unsqueeze(1)  # [N, D]
    q = _range_basis(a.T, wide_start, iterations)  # [D, 2]
    wide = q @ _top2_rotation(q.T @ a.T)
    if a.shape[0] < a.shape[1]:  # k <= N < D: always wide
        return wide
    q = _range_basis(a, tall_start, iterations)  # [N, 2]
    b = q.T @ a  # [2, D]
    tall = b.T @ _top2_rotation(b)
    tall = tall / tall.norm(dim=0, keepdim=True).clamp_min(1e-12)
    return torch.where((weights > 0).sum() < a.shape[1], wide, tall)


class DALHead(nn.Module):
    """``g``: PE rows ``[N, D]`` -> predicted positions ``[N, 2]``.

    ``pca_mode`` (``pca`` only): ``reference`` or ``affine`` (see the module docstring). The
    reference mode draws its two starts once, from ``torch.Generator().manual_seed(seed)``,
    from N(0, 1) as ``pca_lowrank`` does: ``tall_start [D, 2]``, then ``wide_start
    [positions, 2]`` (``positions`` = N, the PE's patch rows). To give it the start of one
    ``torch.pca_lowrank(pe[kept], q=2, niter=5)`` call, ``R``, its first draw: with ``k =
    len(kept)`` rows kept, ``R`` is ``[D, 2]`` when ``k >= D`` (copy it into ``tall_start``) and
    ``[k, 2]`` when ``k < D`` (``wide_start[kept] = R``, ``kept`` in increasing order).
    """

    #: the reference mode's starts (buffers, not saved in checkpoints); absent otherwise
    tall_start: torch.Tensor
    wide_start: torch.Tensor
    #: the ``linear`` / ``mlp`` head; absent for ``pca``
    proj: nn.Module

    def __init__(self, kind: str, dim: int, *, positions: int = 0, pca_mode: str = "reference", seed: int = 0):
        super().__init__()
        if kind not in ("pca", "linear", "mlp"):
            raise ValueError(f"unknown DAL head {kind!r}; allowed: pca, linear, mlp")
        if pca_mode not in ("reference", "affine"):
            raise ValueError(f"unknown pca mode {pca_mode!r}; allowed: reference, affine")
        self.kind, self.pca_mode = kind, pca_mode
        if kind == "pca" and pca_mode == "reference":
            if positions < 1:
                raise ValueError(f"the reference pca head needs positions >= 1 (the PE's patch rows), got {positions}")
            generator = torch.Generator().manual_seed(seed)
            self.register_buffer("tall_start", torch.randn(dim, 2, generator=generator), persistent=False)
            self.register_buffer("wide_start", torch.randn(positions, 2, generator=generator), persistent=False)
        if kind == "linear":
            self.proj = nn.Linear(dim, 2)
        elif kind == "mlp":
            self.proj = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, 2))

    def forward(self, rows: torch.Tensor, targets: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        """``rows [N, D]``, ``targets [N, 2]``, ``weights [N]`` (summing to 1) -> ``[N, 2]``."""
        if self.kind != "pca":
            return self.proj(rows)
        rows, w = rows.float(), weights.float()
        if self.pca_mode == "reference":
            if rows.shape[0] != self.wide_start.shape[0]:
                raise ValueError(f"the reference pca head was built for {self.wide_start.shape[0]} PE rows, got {rows.shape[0]}")
            directions = reference_pca_directions(rows, w, self.tall_start.float(), self.wide_start.float())
            return rows @ directions  # differentiated through the directions, as the reference
        centred = rows - (w.unsqueeze(1) * rows).sum(0, keepdim=True)
        directions = top2_subspace(centred.detach(), w)  # [D, 2]
        z = centred @ directions
        design = torch.cat([z, torch.ones_like(z[:, :1])], dim=1)
        gram = design.T @ (w.unsqueeze(1) * design) + 1e-6 * torch.eye(3, device=z.device)
        coef, _ = torch.linalg.solve_ex(gram, design.T @ (w.unsqueeze(1) * targets))
        return design @ coef


def position_weights(mask: torch.Tensor | None, n: int, device: torch.device) -> torch.Tensor:
    """Weight of each PE row in the loss: its share of the unshuffled (sample, position) pairs.

    ``mask [B, N]`` (True = shuffled) or None (all rows count) -> float ``[N]`` summing to 1
    (to 0 when everything is shuffled). No host sync.
    """
    if mask is None:
        return torch.full((n,), 1.0 / n, device=device)
    kept = (~mask).float().sum(0)
    return kept / kept.sum().clamp_min(1.0)


def dal_loss(head: DALHead, pe_rows: torch.Tensor, grid: tuple[int, int], mask: torch.Tensor | None = None) -> torch.Tensor:
    """Weighted mean L1 between ``head(pe_rows)`` and the grid positions.

    ``pe_rows [H * W, D]``; ``mask [B, H * W]`` (True = shuffled; those rows are left out) -> scalar.
    """
    targets = grid_targets(grid, pe_rows.device)
    weights = position_weights(mask, pe_rows.shape[0], pe_rows.device)
    pred = head(pe_rows, targets, weights)
    per_row = (pred.float() - targets).abs().mean(-1)
    return (per_row * weights).sum()


def dal_weight_at(cfg: MJPConfig, progress: float, warmup: float = 0.0) -> float:
    """lambda at training progress ``progress`` in [0, 1] (fraction of all steps).

    ``constant``: ``cfg.dal_weight``. ``warmup_cosine`` (reference code): linear 0 -> dal_weight
    over the first ``warmup`` fraction, then cosine down to ``dal_final_weight``.
    """
    if cfg.dal == "none":
        return 0.0
    if cfg.dal_schedule == "constant":
        return cfg.dal_weight
    if progress < warmup:
        return cfg.dal_weight * progress / warmup
    t = (progress - warmup) / max(1.0 - warmup, 1e-12)
    return cfg.dal_final_weight + 0.5 * (cfg.dal_weight - cfg.dal_final_weight) * (1 + math.cos(math.pi * min(t, 1.0)))
