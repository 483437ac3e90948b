"""``MJPAlgorithm``: what MJP adds to a training loop beside the model (Algorithm 1 as a step hook).

The model is a pure function of its inputs and parameters: ``model(x, shuffle=...)``. Everything
that changes from batch to batch lives here: the generator that draws masks, permutations and
SPP's pixel orders; the jigsaw warm-up (the reference code trains its first epochs unshuffled);
"which shuffle does this batch get"; and lambda, the DAL loss weight, over training. A training
loop builds one per data-parallel worker, asks it for each batch's shuffle, hands that shuffle to
the model, and checkpoints its ``state_dict`` with the rest of the training state.

Drawing ahead. The sampler's cost is a fixed number of small ops whatever the batch (70 for masks
and permutations), so ``draws_ahead=K`` draws the rows of K batches in one call and hands them out
a batch at a time: about 70 / K sampler ops per step instead of 70. Every row is an independent
draw of the same sampler, so each batch's masks and permutations have the same distribution as a
batch drawn alone (``tests/mjp/test_draws_ahead.py`` compares them); only which generator draw
lands in which step changes. What is left of a draw is dropped when the epoch changes, so the
generator's state at an epoch's end (where the training loop checkpoints) says everything the
next epoch will draw: a run resumed from it draws what the uninterrupted run draws.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from mjp.config import MJPConfig
from mjp.dal import dal_weight_at
from mjp.jigsaw import JigsawShuffle, patch_grid, pixel_orders, sample_shuffle


@dataclass
class _DrawnAhead:
    """Rows of masks and permutations drawn for several batches (``key``: the epoch, grid and
    ratio they were drawn for), and how many were handed out."""

    key: tuple[Any, ...]
    shuffle: JigsawShuffle
    used: int = 0


class MJPAlgorithm:
    """Per-batch decisions of MJP for one model on one worker.

    Args:
        cfg: the model's ``MJPConfig``.
        patch_size: the model's jigsaw patch (``model.mjp_patch_size()``).
        seed: seeds the generator (derive one per worker: ``seed + rank`` or a hash of both).
        device: where masks are drawn (the training device: no host work, no copy per step).
        warmup_epochs: epochs trained without the jigsaw (reference code: 20; ours: 0).
        draws_ahead: batches whose masks and permutations one sampler call draws (1: one per batch).
    """

    def __init__(
        self,
        cfg: MJPConfig,
        patch_size: tuple[int, int],
        *,
        seed: int,
        device: torch.device | str = "cpu",
        warmup_epochs: int = 0,
        draws_ahead: int = 1,
    ):
        if draws_ahead < 1:
            raise ValueError(f"draws_ahead={draws_ahead} must be at least 1 (1: draw for every batch)")
        self.cfg = cfg
        self.patch_size: tuple[int, int] = (patch_size[0], patch_size[1])
        self.warmup_epochs = warmup_epochs
        self.draws_ahead = draws_ahead
        self.generator = torch.Generator(device=device).manual_seed(seed)
        self._ahead: _DrawnAhead | None = None

    @classmethod
    def for_model(
        cls, model: Any, *, seed: int, device: torch.device | str = "cpu", warmup_epochs: int = 0, draws_ahead: int = 1
    ) -> MJPAlgorithm:
        """The algorithm of an MJP model (anything with ``mjp_cfg`` and ``mjp_patch_size()``)."""
        return cls(model.mjp_cfg, model.mjp_patch_size(), seed=seed, device=device, warmup_epochs=warmup_epochs, draws_ahead=draws_ahead)

    def _rows(self, rows: int, grid: tuple[int, int], ratio: float, epoch: int) -> JigsawShuffle:
        """``rows`` rows of independent masks and permutations (``[rows, N]``), from what was drawn
        ahead in this epoch, or from a new draw of ``draws_ahead`` times as many."""
        cfg = self.cfg
        key = (epoch, grid, ratio)
        ahead = self._ahead
        if ahead is None or ahead.key != key or ahead.used + rows > ahead.shuffle.mask.shape[0]:
            drawn = sample_shuffle(
                rows * self.draws_ahead,
                grid,
                ratio,
                generator=self.generator,
                apply_prob=cfg.jigsaw_prob,
                min_block=cfg.min_block_patches,
                aspect_ratio=cfg.aspect_ratio,
            )
            ahead = self._ahead = _DrawnAhead(key, drawn)
        part = slice(ahead.used, ahead.used + rows)
        ahead.used += rows
        return JigsawShuffle(ahead.shuffle.mask[part], ahead.shuffle.perm[part], grid)

    def shuffles_in(self, epoch: int) -> bool:
        """Whether batches of ``epoch`` (0-based) are shuffled."""
        return self.cfg.shuffles and epoch >= self.warmup_epochs

    def shuffle(self, images: torch.Tensor, epoch: int) -> JigsawShuffle | None:
        """This batch's shuffle for ``images [B, C, H, W]`` in ``epoch``, on the generator's device,
        or None when MJP does not shuffle then. SPP's shuffle carries its pixel orders."""
        if not self.shuffles_in(epoch):
            return None
        cfg = self.cfg
        grid = patch_grid(tuple(images.shape[-2:]), self.patch_size)
        spp = cfg.shuffle == "patches_and_pixels"
        reference_spp = spp and cfg.spp_mode == "reference"
        ratio = 1.0 if reference_spp else cfg.mask_ratio  # the reference's SPP moves every patch
        batch = images.shape[0]
        if cfg.mask_mode == "per_batch" or reference_spp:  # one row for the whole batch (the reference code)
            one = self._rows(1, grid, ratio, epoch)
            shuffle = JigsawShuffle(one.mask.expand(batch, -1), one.perm.expand(batch, -1), grid)
        else:
            shuffle = self._rows(batch, grid, ratio, epoch)
        if spp:
            order = pixel_orders(shuffle.mask, self.patch_size, generator=self.generator, shared=reference_spp)
            shuffle = JigsawShuffle(shuffle.mask, shuffle.perm, shuffle.grid, order)
        return shuffle.to(images.device)

    def dal_weight(self, progress: float, warmup: float = 0.0) -> float:
        """lambda at ``progress`` in [0, 1] of all steps (``mjp.dal.dal_weight_at``)."""
        return dal_weight_at(self.cfg, progress, warmup)

    def state_dict(self) -> dict[str, torch.Tensor]:
        """The generator's state (a uint8 tensor), for checkpoints."""
        return {"generator": self.generator.get_state()}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        self.generator.set_state(state["generator"])
        self._ahead = None  # drawn from the state before; the next batch draws from the one loaded
