"""Block-wise random selection of patches (Algorithm 1, step 3; BEiT-style blocks).

The sampler is vectorised over the batch: each round proposes one random rectangle per sample
(area and aspect ratio drawn as in BEiT) and keeps it where it adds new patches without
overshooting the target. A fixed number of rounds keeps the step free of host syncs.

Exact count. The target is ``k = round(N * ratio)`` for every sample. Blocks never overshoot
``k``; the final selection is ``topk(score, k)`` with ``score = 2 * in_block + 1 * touches_block
+ u`` (``u ~ U[0, 1)``), so every block patch is kept, any shortfall is filled first with patches
that share an edge with a block (its 4-neighbours: they join that block, so the blocks stay
blocks), then at random. ``topk`` returns exactly ``k`` indices per row, which is the guarantee.
With diagonal (8-) neighbours, 17.7% of the masked components at ratio 0.03 on 14x14 were
single patches touching a block at a corner; BEiT's generator gives 2.4%, this one under 1%.

Coverage. Like BEiT's, the rectangles cover the centre of the grid more often than its border
(at ratio 0.27 on 14x14: about 50-60% of samples select a centre patch, 3-6% a corner).
"""

from __future__ import annotations

import math

import torch

#: BEiT's aspect-ratio bounds for a block: [0.3, 1/0.3].
DEFAULT_ASPECT_RATIO: tuple[float, float] = (0.3, 1 / 0.3)
#: BEiT's smallest block (patches).
DEFAULT_MIN_BLOCK = 4


def target_count(num_patches: int, ratio: float) -> int:
    """Number of patches selected per sample: ``round(N * ratio)`` (Python's round-half-even)."""
    return int(round(num_patches * ratio))


def _uniform(shape: tuple[int, ...], generator: torch.Generator | None, device: torch.device) -> torch.Tensor:
    return torch.rand(shape, generator=generator, device=device)


def sample_block_masks(
    batch_size: int,
    grid_size: int | tuple[int, int],
    ratio: float,
    *,
    generator: torch.Generator | None = None,
    device: torch.device | str | None = None,
    min_block: int = DEFAULT_MIN_BLOCK,
    max_block: int | None = None,
    aspect_ratio: tuple[float, float] = DEFAULT_ASPECT_RATIO,
    rounds: int | None = None,
) -> torch.Tensor:
    """Sample one block-wise mask per sample.

    Args:
        batch_size: B.
        grid_size: patch grid (H, W), or an int for a square grid.
        ratio: fraction of the N = H * W patches to select, in [0, 1].
        generator: source of randomness; masks are drawn on the generator's device (CPU when
            None) and moved to ``device``.
        device: where the returned mask lives (default: the generator's device).
        min_block, max_block: bounds on a block's area in patches (max defaults to the target).
        aspect_ratio: (low, high) bounds on a block's height / width.
        rounds: block proposals per sample (default: enough for the target to be reached
            almost always; any shortfall is filled at the blocks' border, see module doc).

    Returns:
        bool tensor ``[B, H * W]`` (row-major), True = selected for shuffling; every row has
        exactly ``round(N * ratio)`` True entries.
    """
    h, w = (grid_size, grid_size) if isinstance(grid_size, int) else tuple(grid_size)
    if not 0.0 <= ratio <= 1.0:
        raise ValueError(f"ratio={ratio!r} is outside the allowed range [0, 1]")
    if h < 1 or w < 1 or batch_size < 0:
        raise ValueError(f"grid_size={(h, w)} and batch_size={batch_size} must be positive")
    lo_ar, hi_ar = aspect_ratio
    if not 0 < lo_ar <= hi_ar:
        raise ValueError(f"aspect_ratio={aspect_ratio!r}: need 0 < low <= high")
    n = h * w
    k = target_count(n, ratio)
    gen_device = generator.device if generator is not None else torch.device("cpu")
    out_device = torch.device(device) if device is not None else gen_device
    if k == 0 or k == n:
        return torch.full((batch_size, n), k == n, dtype=torch.bool, device=out_device)

    min_area = min(min_block, k)
    max_area = min(max_block if max_block is not None else k, k)
    if rounds is None:
        rounds = max(8, 2 * math.ceil(k / max(min_area, 1)) + 4)
        rounds = min(rounds, 64)

    rows = torch.arange(h, device=gen_device).view(1, h, 1)
    cols = torch.arange(w, device=gen_device).view(1, 1, w)
    mask = torch.zeros(batch_size, h, w, dtype=torch.bool, device=gen_device)
    count = torch.zeros(batch_size, dtype=torch.long, device=gen_device)
    log_lo, log_hi = math.log(lo_ar), math.log(hi_ar)
    for _ in range(rounds):
        u = _uniform((4, batch_size), generator, gen_device)
        area = min_area + u[0] * (max_area - min_area)
        aspect = torch.exp(log_lo + u[1] * (log_hi - log_lo))
        bh = torch.round(torch.sqrt(area * aspect)).clamp(1, h).long()
        bw = torch.round(torch.sqrt(area / aspect)).clamp(1, w).long()
        top = (u[2] * (h - bh + 1)).floor().long()
        left = (u[3] * (w - bw + 1)).floor().long()
        rect = (
            (rows >= top.view(-1, 1, 1))
            & (rows < (top + bh).view(-1, 1, 1))
            & (cols >= left.view(-1, 1, 1))
            & (cols < (left + bw).view(-1, 1, 1))
        )
        added = (rect & ~mask).flatten(1).sum(1)
        accept = (bh * bw >= min_area) & (added > 0) & (count + added <= k)
        mask |= rect & accept.view(-1, 1, 1)
        count += added * accept

    # Exact count: keep every block patch, top up at the blocks' border, then anywhere.
    p = torch.nn.functional.pad(mask.to(torch.uint8), (1, 1, 1, 1)).bool()
    near = (p[:, :-2, 1:-1] | p[:, 2:, 1:-1] | p[:, 1:-1, :-2] | p[:, 1:-1, 2:]) & ~mask
    score = 2.0 * mask.flatten(1) + 1.0 * near.flatten(1) + _uniform((batch_size, n), generator, gen_device)
    chosen = score.topk(k, dim=1).indices
    out = torch.zeros(batch_size, n, dtype=torch.bool, device=gen_device)
    out.scatter_(1, chosen, True)
    return out.to(out_device, non_blocking=True)
