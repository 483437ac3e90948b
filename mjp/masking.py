"""Block-wise random selection of patches (Algorithm 1, step 3; BEiT-style blocks), without a loop.

Contract. ``sample_block_masks`` returns, for every sample, exactly ``k = round(N * ratio)``
selected patches of the ``H x W`` grid, laid out in rectangular blocks; the same generator state
gives the same masks, on any device, whatever the batch is later split into.

How. BEiT's generator proposes rectangles one at a time and keeps one only while the selected
count stays under the target, a loop that launches a few dozen small kernels per round on a GPU.
Here every sample draws ``R`` rectangles at once and the budget is shared out in closed form:
rectangle ``r`` asks for an area ``a_r ~ U[min_block, max_block]`` (BEiT's), and receives
``min(a_r, k - (a_1 + ... + a_{r-1}))``, what its predecessors left of the target; a rectangle left
with less than ``min_block`` patches is dropped. Its shape is drawn from BEiT's log-uniform aspect
ratio with ``height * width <= area``, its place uniformly on the grid. The union of the kept
rectangles never exceeds ``k``, since their areas add up to at most ``k``. One pass, a fixed number
of kernels: the work grows with ``B * R * N`` elements, not with the number of launches.

Exact count. Overlapping rectangles and rounding leave a shortfall; the final selection is
``topk(score, k)`` with ``score = 2 * in_block + 1 * touches_block + u`` (``u ~ U[0, 1)``), so
every block patch is kept, the shortfall is filled first with patches that share an edge with a
block (its 4-neighbours: they join that block, so the blocks stay blocks), then at random.
``topk`` returns exactly ``k`` indices per row, which is the guarantee.

Coverage. Like BEiT's, the rectangles cover the centre of the grid more often than its border.
"""

from __future__ import annotations

import math
from functools import lru_cache

import torch
import torch.nn.functional as F

#: BEiT's aspect-ratio bounds for a block: [0.3, 1/0.3].
DEFAULT_ASPECT_RATIO: tuple[float, float] = (0.3, 1 / 0.3)
#: BEiT's smallest block (patches).
DEFAULT_MIN_BLOCK = 4
#: Top-up score of a patch per block patch at Manhattan distance 0, 1, 2, 3 from it. Each weight
#: exceeds the most the next rings can add (4 patches at distance 1, 8 at 2, 12 at 3, plus u < 1),
#: so top-k takes the blocks, then their edge neighbours, then the next ring out, and so on.
TOPUP_WEIGHTS: tuple[float, ...] = (2048.0, 256.0, 16.0, 1.0)


def _topup_kernel() -> torch.Tensor:
    """``[1, 1, 7, 7]``: ``TOPUP_WEIGHTS[d]`` at Manhattan distance ``d`` from the centre, 0 beyond."""
    offsets = torch.arange(-3, 4).abs()
    distance = (offsets.view(-1, 1) + offsets.view(1, -1)).clamp(max=len(TOPUP_WEIGHTS))
    return torch.tensor([*TOPUP_WEIGHTS, 0.0])[distance].view(1, 1, 7, 7)


_TOPUP_KERNEL = _topup_kernel()


def target_count(num_patches: int, ratio: float) -> int:
    """Number of patches selected per sample: ``round(N * ratio)`` (Python's round-half-even)."""
    return int(round(num_patches * ratio))


def smallest_ratio(num_patches: int, count: int = 2) -> float:
    """The smallest ratio r (4 decimals, rounded up) with ``target_count(num_patches, r) >= count``."""
    r = math.ceil((count - 0.5) / num_patches * 1e4) / 1e4
    while target_count(num_patches, r) < count:
        r += 1e-4
    return round(r, 4)


def check_grid_ratio(key: str, ratio: float, num_patches: int) -> None:
    """The one rule for a shuffle ratio on an N-patch grid: 0 (nothing moves) or a ratio that selects
    at least 2 patches (a jigsaw of one patch leaves the image as it was). Raises ``ValueError``
    naming ``key``, the value and what is allowed."""
    k = target_count(num_patches, ratio)
    if ratio > 0 and k < 2:
        raise ValueError(
            f"{key}={ratio} selects round({num_patches} x {ratio}) = {k} of the {num_patches} patches, and a jigsaw "
            f"needs at least 2; allowed: 0 (no shuffle) or >= {smallest_ratio(num_patches)} (2 patches)"
        )


def check_ratio(ratio: float) -> None:
    """Raise ``ValueError`` naming ``ratio`` unless it is a fraction in [0, 1] (NaN is refused)."""
    if not 0.0 <= ratio <= 1.0:
        raise ValueError(f"ratio={ratio!r} is outside the allowed range [0, 1]")


@lru_cache(maxsize=32)
def _grid_constants(h: int, w: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Made once per grid and device: coordinates ``[max(H, W)]``, ``(H + 1, W + 1)`` as ``[2, 1]``,
    and the top-up kernel ``[1, 1, 7, 7]``: ``TOPUP_WEIGHTS[d]`` at Manhattan distance ``d``."""
    coords = torch.arange(max(h, w), dtype=torch.float32, device=device)
    places = torch.tensor([[h + 1.0], [w + 1.0]], device=device)
    return coords, places, _TOPUP_KERNEL.to(device)


def default_rounds(k: int, min_area: int, max_area: int) -> int:
    """Rectangles proposed per sample: enough to share out ``k`` at the mean area, at least 8."""
    return min(64, max(8, math.ceil(2 * k / max(min_area + max_area, 1)) + 4))


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
        rounds: rectangles proposed per sample (default ``default_rounds``); changes tensor sizes,
            never the number of kernels.

    Returns:
        bool tensor ``[B, H * W]`` (row-major), True = selected for shuffling; every row has
        exactly ``round(N * ratio)`` True entries.
    """
    h, w = (grid_size, grid_size) if isinstance(grid_size, int) else tuple(grid_size)
    check_ratio(ratio)
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

    min_area = min(max(min_block, 1), k)
    max_area = max(min(max_block if max_block is not None else k, k), min_area)
    r = rounds if rounds is not None else default_rounds(k, min_area, max_area)
    coords, places, kernel = _grid_constants(h, w, gen_device)
    log_lo, log_span = math.log(lo_ar), math.log(hi_ar) - math.log(lo_ar)

    # Every tensor below keeps a trailing axis of 1 so that broadcasting replaces reshapes.
    u_shape, u_place = torch.rand(batch_size, r, 2, 2, 1, generator=generator, device=gen_device).unbind(2)
    u_area, u_aspect = u_shape.unbind(2)  # [B, R, 1] each; u_place [B, R, 2, 1]
    # Budget shared out in order: each rectangle gets at most what its predecessors left of k.
    asked = u_area * (max_area - min_area) + min_area
    given = torch.minimum(asked, asked - asked.cumsum(1) + k)
    given = torch.threshold(given, min_area - 0.5, 0.0)  # too little left: no rectangle
    aspect = torch.exp(u_aspect * log_span + log_lo)
    height = torch.sqrt(given * aspect).round().clamp(max=h)
    # height * width <= given. A dropped rectangle is 0 x NaN (0 / 0): every comparison below is
    # False for it, so it covers nothing.
    width = torch.floor(given / height).clamp(max=w)
    size = torch.stack([height, width], dim=2)  # [B, R, 2, 1]: (rows, cols)
    start = torch.floor(u_place * (places - size))  # top-left corner, uniform over the places
    offset = coords - start  # [B, R, 2, L]
    inside = (offset >= 0) & (offset < size)
    in_rows, in_cols = inside.unbind(2)
    if h != w:
        in_rows, in_cols = in_rows[..., :h], in_cols[..., :w]
    rect = in_rows.unsqueeze(-1) & in_cols.unsqueeze(-2)  # [B, R, H, W]
    blocks = rect.any(1, keepdim=True).float()  # [B, 1, H, W]: the union never exceeds k

    # Exact count: top-k on the score keeps the blocks and grows them ring by ring (TOPUP_WEIGHTS);
    # u ~ U[0, 1) breaks ties, and picks at random where no block is within 3 patches.
    score = F.conv2d(blocks, kernel, padding=3).view(batch_size, n) + torch.rand(batch_size, n, generator=generator, device=gen_device)
    chosen = score.topk(k, dim=1).indices
    out = torch.zeros(batch_size, n, dtype=torch.bool, device=gen_device).scatter_(1, chosen, True)
    return out.to(out_device, non_blocking=True)

