"""``runtime.compile`` on the device input path: the work after the crop + resize
(``augment.augment_resized``: flip, RandAugment, normalisation, erasing) compiled once into one
region, ``torch.compile(fullgraph=True, dynamic=False)``.

That part runs the same aten ops (709 for DeiT's recipe) on tensors of the same shapes for every
batch of B samples, whatever the batch drew, with no host sync; the loader drops the last partial
batch, so every batch has B samples. One trace then serves the whole run: Inductor fuses the
elementwise and select work into a few kernels, where eager launches one kernel per op, most of
them small. A graph break or a recompile would undo that; ``tests/trainables/data/gpu/test_compiled.py``
traces the loader's batches on the CPU and finds one graph and no break.

The loader compiles it on its own thread before the prefetch thread starts (``warm_up``): while
it compiles, torch.compile saves and restores the process's random states, which a compile in
the prefetch thread would do under the training step. Not a CUDA graph (``mode="reduce-overhead"``):
a replay writes into the same output memory, and the prefetch thread makes batch n+1 while the
step still reads batch n. On the CPU, Inductor's compile of this region takes minutes.
"""

from __future__ import annotations

import torch

from trainables.data.gpu.augment import BatchParams, DeviceRecipe, augment_batch, augment_resized


class CompiledAugment:
    """``augment_resized`` for ``recipe``, compiled (``backend``: torch.compile's; the tests trace
    with ``"eager"``, which checks the graph without generating code): uint8 ``[B, 3, S, S]`` and
    the batch's parameters -> float32 ``[B, 3, S, S]``."""

    def __init__(self, recipe: DeviceRecipe, backend: str = "inductor") -> None:
        self.recipe = recipe

        def finish(x: torch.Tensor, params: BatchParams) -> torch.Tensor:
            return augment_resized(x, params, recipe)

        self._compiled = torch.compile(finish, fullgraph=True, dynamic=False, backend=backend)
        self._warm: set[tuple[int, str]] = set()

    def __call__(self, x: torch.Tensor, params: BatchParams) -> torch.Tensor:
        return self._compiled(x, params)

    def warm_up(self, batch: int, device: torch.device) -> None:
        """Compile for batches of ``batch`` samples on ``device`` now, on the calling thread (once):
        one batch of blank images through the same path as the loader's."""
        key = (batch, str(device))
        if key in self._warm:
            return
        size = self.recipe.img_size
        blank = [torch.zeros(3, size, size, dtype=torch.uint8, device=device)] * batch
        augment_batch(blank, list(range(batch)), self.recipe, self)
        self._warm.add(key)
