"""Block-wise random selection of patches (Algorithm 1, step 3: BEiT's block-wise masking), without a loop.

Contract. ``sample_block_masks`` returns, for every sample, exactly ``k = round(N * ratio)``
selected patches of the ``H x W`` grid, laid out as Algorithm 1's ``BlockwiseMask`` lays them out;
the same generator state gives the same masks, on any device, whatever the batch is later split
into. Masks are drawn on the generator's device in a fixed number of aten ops (no Python loop over
rounds, no host sync, no shape that depends on the data).

What is emulated. BEiT's generator (reference [2] of the paper) repeats, until ``k`` patches are
selected: propose a rectangle of area ``a ~ U(min_block, remaining)`` and aspect ratio
``exp(U(log 0.3, log 1/0.3))``, with ``h = round(sqrt(a * aspect))``, ``w = round(sqrt(a / aspect))``,
``h < H``, ``w < W``, placed uniformly; keep it when the number of patches it adds is in
``(0, remaining]``, else propose again. Once fewer than ``min_block`` patches remain, its proposals
have areas in ``[remaining, min_block]`` and the ones it keeps are small rectangles, or larger ones
that mostly overlap a block and add a strip beside it. (When ``k < min_block`` the very first
proposal is already of that kind: blocks of at most ``k`` patches.)

How, in one pass:

1. Areas. Each sample has ``R`` slots. ``U(min, remaining)`` makes the remainder an affine
   recurrence, ``rem_r = q_r * (rem_{r-1} - min)`` with ``q_r ~ U[0, 1)``, so the remainder before
   every slot is one ``cumprod`` and one ``cumsum`` away (``before * (k - min * cumsum(1 / before))
   + min``, ``before`` the product of the earlier ``q``). The remainder here is nominal: it counts
   the proposed areas (each slot's first try's draw, even when a later try is the one kept), not
   the rounded rectangles or their overlaps.
2. Retries. Every slot has ``T`` tries (``TRIES``), each with its own aspect ratio; the first slot's
   tries also have their own areas (nothing is placed yet, so this is BEiT's redraw exactly), later
   slots draw one area per ``AREA_GROUP`` tries. A slot keeps its first try that fits: ``h < H``,
   ``w < W`` and ``h * w`` at most the remainder before the slot. Shapes are rounded on both sides,
   as BEiT's, so there is no tall or wide bias.
3. Rectangles. The kept rectangles are placed uniformly and rasterised at once; a patch covered by
   several keeps the earliest slot's priority. If the nominal remainder let the union exceed ``k``,
   the final top-k drops patches of the latest slot only.
4. Exact count. ``topk(score, k)`` with ``score`` = slot priority on the blocks, then a bonus for
   patches beside a block (3 x 3 neighbourhood), then ``-distance^2`` to a random point. The
   patches the rectangles leave over (BEiT's remainder rounds, and the patches lost to overlaps)
   thus grow as a strip along the side of a block nearest that point, or, when the point is more
   than about ``sqrt(RIM_BONUS)`` patches from every block, as one compact piece around it: BEiT's
   two kinds of remainder pieces. The point is uniform in the grid shrunk by ``INSET *
   sqrt(deficit)`` on each side, ``deficit`` the patches still missing: BEiT places a remainder
   rectangle of ``d`` patches uniformly where it fits, so its centre keeps about ``sqrt(d) / 2``
   from the edge (a point uniform on the whole grid covered the outer ring 10-26% more than
   Algorithm 1). ``topk`` returns exactly ``k`` indices per row.

Measured against a loop implementation of Algorithm 1 run to the exact count (``min_block`` 16,
1,000 masks per setting, ratios 0.1/0.25/0.4/0.5 on 7x7, 14x14 and 16x16, this project's 2-core
CPU; ``tests/mjp/test_masking_statistics.py`` checks the same with 1,500): coverage of the grid's
outer ring 0.92-1.07 of Algorithm 1's (7x7 at ratio 0.1, where ``k = 5 < min_block``: 0.82); fill
of the pieces' bounding boxes within 0.02; pieces per mask 0.91-1.08 of Algorithm 1's; mean
log(h/w) of the pieces within 0.012 of 0; edge rows and edge columns covered alike. Where it
differs: the share of masks made only of clean rectangles is within 0.045 except at 7x7 ratio 0.1
(0.08 fewer); and step 4 places 12-21% of the patches on 14x14 and 16x16 (2-36% on 7x7), where
BEiT's own remainder rounds (fewer than ``min_block`` left) place 7-21%, the rest being patches
our nominal remainder loses to overlaps. BENCHMARKS.md has the top-up share per case.

Coverage. Like BEiT's, the rectangles cover the centre of the grid more often than its border.

Cost. 59 aten ops per call (70 for ``mjp.sample_shuffle`` with its permutation), whatever the
batch, ratio, square grid or ``min_block``; a non-square grid adds 2 (two slices). The largest
tensors are ``[B, R, T, 2, 1]`` (shapes of the tries) and ``[B, R, H, W]`` (the kept rectangles).
"""

from __future__ import annotations

import math
from functools import lru_cache

import torch
import torch.nn.functional as F

#: every draw and constant of the sampler: the same masks for a seed whatever torch's default dtype
F32 = torch.float32

#: BEiT's aspect-ratio bounds for a block: [0.3, 1/0.3].
DEFAULT_ASPECT_RATIO: tuple[float, float] = (0.3, 1 / 0.3)
#: Algorithm 1's (BEiT's) smallest block, in patches; the paper's reference code uses 8
#: (``min_num_patches=8`` in its generator), an option (``MJPConfig.min_block_patches=8``).
DEFAULT_MIN_BLOCK = 16
#: Tries per slot (BEiT proposes again until a rectangle fits; 32 tries rarely run out).
TRIES = 32
#: After the first slot, tries share one area draw per this many tries (retries then vary the
#: aspect ratio and place; see the module docstring, step 2).
AREA_GROUP = 16
#: Score bonus of a patch beside a block, in squared patch distances to the random point (step 4).
RIM_BONUS = 0.5
#: The top-up's point keeps ``INSET * sqrt(deficit)`` patches from the grid's edge (step 4).
INSET = 0.4
#: Score of a block patch: far above any bonus or distance term on grids up to 256 x 256.
_BLOCK = 2.0**20


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


def default_slots(k: int, min_block: int) -> int:
    """Slots per sample: the rounds BEiT's ``U(min, remaining)`` takes to bring ``k`` under ``min_block``
    (about log2(k / min_block)), plus room for the remainder; 4..12."""
    return min(12, max(4, math.ceil(math.log2(max(k / min_block, 1.0))) + 4))


@lru_cache(maxsize=32)
def _constants(
    h: int, w: int, slots: int, tries: int, min_block: int, aspect_ratio: tuple[float, float], device: torch.device
) -> dict[str, torch.Tensor]:
    """Made once per grid, shape and device (each a few hundred numbers at most)."""
    lo, hi = math.log(aspect_ratio[0]), math.log(aspect_ratio[1])
    half = torch.tensor([[0.5], [-0.5]], dtype=F32)  # sqrt(aspect) for the height, 1 / sqrt(aspect) for the width
    group = min(AREA_GROUP, tries)
    try_of = torch.arange(tries).repeat(slots, 1)
    try_of[1:] = try_of[1:] // group * group  # slot 0: an area per try; later slots: per group
    rows, cols = torch.meshgrid(torch.arange(h, dtype=F32), torch.arange(w, dtype=F32), indexing="ij")
    rows, cols = rows.flatten(), cols.flatten()
    made = {
        "slot_of": torch.arange(slots).view(slots, 1).expand(slots, tries),  # [R, T]
        "try_of": try_of,  # [R, T]
        "min_block": torch.tensor(float(min_block), dtype=F32),
        "log_aspect_lo": half * lo,  # [2, 1]
        "log_aspect_span": half * (hi - lo),  # [2, 1]
        "too_big": torch.tensor(float("inf"), dtype=F32),
        "limits": torch.tensor([[float(h)], [float(w)]], dtype=F32),  # [2, 1]: h < H, w < W
        "places": torch.tensor([[h + 1.0], [w + 1.0]], dtype=F32),  # [2, 1]
        "grid": torch.tensor([[float(h), float(w)]], dtype=F32),  # [1, 2]: the top-up point's range (step 4)
        "half_grid": torch.tensor([[h / 2, w / 2]], dtype=F32),  # [1, 2]
        "coords": torch.arange(max(h, w), dtype=F32),  # [L]
        # Earlier slots keep their patches first if the union overshoots k.
        "priority": (_BLOCK * (2.0 - torch.arange(slots, dtype=F32) / slots)).view(slots, 1, 1),
        # -|p' - c|^2 + |c|^2 = -|p'|^2 + 2 p'.c for patch centres p' = p + 1/2: addmm(const, c, lin).
        "distance_const": -((rows + 0.5) ** 2 + (cols + 0.5) ** 2).unsqueeze(0),  # [1, N]
        "distance_lin": torch.stack([2.0 * (rows + 0.5), 2.0 * (cols + 0.5)]),  # [2, N]
    }
    return {name: t.to(device) for name, t in made.items()}


def sample_block_masks(
    batch_size: int,
    grid_size: int | tuple[int, int],
    ratio: float,
    *,
    generator: torch.Generator | None = None,
    device: torch.device | str | None = None,
    min_block: int = DEFAULT_MIN_BLOCK,
    aspect_ratio: tuple[float, float] = DEFAULT_ASPECT_RATIO,
    slots: int | None = None,
) -> torch.Tensor:
    """Sample one block-wise mask per sample (Algorithm 1's ``BlockwiseMask``; see the module docstring).

    Args:
        batch_size: B.
        grid_size: patch grid (H, W), or an int for a square grid.
        ratio: fraction of the N = H * W patches to select, in [0, 1].
        generator: source of randomness; masks are drawn on the generator's device (CPU when
            None) and moved to ``device``.
        device: where the returned mask lives (default: the generator's device).
        min_block: smallest block proposed, in patches (Algorithm 1 / BEiT: 16; the reference code:
            8). Any value >= 1: when it exceeds the target, blocks are at most the target, as BEiT's.
        aspect_ratio: (low, high) bounds on a block's height / width.
        slots: rectangles per sample before the top-up (default ``default_slots``); changes tensor
            sizes, never the number of ops.

    Returns:
        bool tensor ``[B, H * W]`` (row-major), True = selected for shuffling; every row has
        exactly ``round(N * ratio)`` True entries.
    """
    h, w = (grid_size, grid_size) if isinstance(grid_size, int) else tuple(grid_size)
    check_ratio(ratio)
    if h < 1 or w < 1 or batch_size < 0:
        raise ValueError(f"grid_size={(h, w)} and batch_size={batch_size} must be positive")
    if not (isinstance(min_block, int) and min_block >= 1):
        raise ValueError(f"min_block={min_block!r}: allowed is an int >= 1 (patches)")
    lo_ar, hi_ar = aspect_ratio
    if not 0 < lo_ar <= hi_ar:
        raise ValueError(f"aspect_ratio={aspect_ratio!r}: need 0 < low <= high")
    n = h * w
    k = target_count(n, ratio)
    gen_device = generator.device if generator is not None else torch.device("cpu")
    out_device = torch.device(device) if device is not None else gen_device
    if k == 0 or k == n:
        return torch.full((batch_size, n), k == n, dtype=torch.bool, device=out_device)

    r = slots if slots is not None else default_slots(k, min_block)
    c = _constants(h, w, r, TRIES, min_block, (float(lo_ar), float(hi_ar)), gen_device)
    b = batch_size
    blocks = _rectangles(b, (h, w), k, c, generator, gen_device, min_block)
    # 4. Exact count: blocks, then strips beside them or a compact piece near a random point.
    rim = F.max_pool2d(blocks, 3, stride=1, padding=1)  # a block's priority on its 3 x 3 neighbourhood
    near = torch.addmm(c["distance_const"], _top_up_point(blocks, k, c, generator, gen_device), c["distance_lin"])
    score = torch.add(blocks, rim, alpha=RIM_BONUS / _BLOCK).view(b, n) + near
    chosen = score.topk(k, dim=1).indices
    out = torch.zeros(b, n, dtype=torch.bool, device=gen_device).scatter_(1, chosen, True)
    return out.to(out_device, non_blocking=True)


def _top_up_point(
    blocks: torch.Tensor, k: int, c: dict[str, torch.Tensor], generator: torch.Generator | None, gen_device: torch.device
) -> torch.Tensor:
    """``[B, 2]`` float: the point the top-up grows towards, ``(row, col)`` in patch units (a patch's
    centre is its index + 1/2), uniform in the grid shrunk by ``INSET * sqrt(deficit)`` on every side,
    ``deficit = k - patches the rectangles cover`` (>= 1). BEiT places a remainder rectangle of ``d``
    patches uniformly where it fits, so its centre keeps about ``sqrt(d) / 2`` from the edge."""
    deficit = torch.rsub((blocks > 0).sum((1, 2, 3), dtype=F32), k).clamp(min=1).unsqueeze(1)  # [B, 1]: counts, exact in float32
    inset = torch.minimum(deficit.sqrt() * INSET, c["half_grid"])  # [B, 2]: inside even a thin grid
    u = torch.rand(blocks.shape[0], 2, generator=generator, device=gen_device, dtype=F32)
    return torch.addcmul(inset, u, c["grid"] - 2 * inset)


def _rectangles(
    b: int,
    grid: tuple[int, int],
    k: int,
    c: dict[str, torch.Tensor],
    generator: torch.Generator | None,
    gen_device: torch.device,
    min_block: int,
) -> torch.Tensor:
    """Steps 1-3: ``[B, 1, H, W]`` float, the earliest covering slot's priority on the kept rectangles, 0 elsewhere."""
    h, w = grid
    r, t = c["slot_of"].shape
    # 1. Areas: U(min, remaining) for every slot at once. q ~ U[0, 1): area = lerp(before, min, q).
    q = torch.rand(b, r, t, 1, 1, generator=generator, device=gen_device, dtype=F32)[:, c["slot_of"], c["try_of"]]  # [B, R, T, 1, 1]
    q_slot = q[:, :, :1]  # the slot's own draw drives the nominal remainder
    before = q_slot.cumprod(1) / q_slot  # product of the earlier slots' q; [B, R, 1, 1, 1]
    remaining = torch.addcmul(c["min_block"], before, torch.rsub(before.reciprocal().cumsum(1), k, alpha=min_block))
    area = torch.lerp(remaining, c["min_block"], q)  # U(min, remaining), or U(remaining, min) below min
    # 2. Shapes rounded on both sides (BEiT's); each slot keeps its first try that fits.
    u_aspect = torch.rand(b, r, t, 1, 1, generator=generator, device=gen_device, dtype=F32)
    size = (torch.exp(torch.addcmul(c["log_aspect_lo"], c["log_aspect_span"], u_aspect)) * area.sqrt()).round()  # [B, R, T, 2, 1]
    fits = torch.where(size < c["limits"], size, c["too_big"]).prod(3, keepdim=True) <= remaining  # [B, R, T, 1, 1]
    first = fits & (fits.cumsum(2) == 1)
    # An area below 0 (a slot after the remainder ran out) gives NaN sizes: they never fit.
    size = (size * first).sum(2)  # [B, R, 2, 1]; 0 x 0 when no try fits
    # 3. Rectangles placed uniformly, rasterised at once; every tensor keeps a trailing axis of 1.
    start = torch.floor(torch.rand(b, r, 2, 1, generator=generator, device=gen_device, dtype=F32) * (c["places"] - size))
    offset = c["coords"] - start  # [B, R, 2, L]
    inside = (offset >= 0) & (offset < size)
    in_rows, in_cols = inside.unbind(2)
    if h != w:
        in_rows, in_cols = in_rows[..., :h], in_cols[..., :w]
    rect = in_rows.unsqueeze(-1) & in_cols.unsqueeze(-2)  # [B, R, H, W]
    return (rect * c["priority"]).amax(1, keepdim=True)  # [B, 1, H, W]: earliest slot's priority, 0 off blocks


def rectangle_share(
    batch_size: int,
    grid_size: int | tuple[int, int],
    ratio: float,
    *,
    generator: torch.Generator | None = None,
    min_block: int = DEFAULT_MIN_BLOCK,
) -> float:
    """Diagnostics (host sync): the share of the ``B * k`` selected patches that the rectangles
    (steps 1-3) place; the rest comes from the top-up (step 4). Same draws as ``sample_block_masks``
    with its default aspect ratio and slot count."""
    h, w = (grid_size, grid_size) if isinstance(grid_size, int) else tuple(grid_size)
    k = target_count(h * w, ratio)
    if k in (0, h * w):
        return 1.0
    gen_device = generator.device if generator is not None else torch.device("cpu")
    c = _constants(h, w, default_slots(k, min_block), TRIES, min_block, DEFAULT_ASPECT_RATIO, gen_device)
    blocks = _rectangles(batch_size, (h, w), k, c, generator, gen_device, min_block)
    return float((blocks > 0).sum((1, 2, 3)).clamp(max=k).sum()) / (batch_size * k)
