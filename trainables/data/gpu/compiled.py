"""``runtime.compile`` on the device input path: the work after the crop + resize
(``augment.augment_resized``: flip, RandAugment, normalisation, erasing) compiled once into one
region, ``torch.compile(fullgraph=True, dynamic=False)``.

That part runs the same aten ops (709 for DeiT's recipe) on tensors of the same shapes for every
batch of B samples, whatever the batch drew, with no host sync; the loader drops the last partial
batch, so every batch has B samples. One trace then serves the whole run: Inductor fuses the
elementwise and select work into a few kernels, where eager launches one kernel per op, most of
them small. A graph break or a recompile would undo that; ``tests/trainables/data/gpu/test_compiled.py``
traces the loader's batches on the CPU and finds one graph and none.

Not a CUDA graph (``mode="reduce-overhead"``): a replay writes into the same output memory, and the
prefetch thread (``prefetch.py``) makes batch n+1 while the step still reads batch n.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from trainables.data.gpu.augment import BatchParams, DeviceRecipe, augment_resized

#: ``augment_resized`` for one recipe: uint8 ``[B, 3, S, S]`` and the batch's parameters -> float32 ``[B, 3, S, S]``
Finish = Callable[[torch.Tensor, BatchParams], torch.Tensor]


def compiled_augment(recipe: DeviceRecipe, backend: str = "inductor") -> Finish:
    """``augment_resized`` for ``recipe``, compiled on its first batch (``backend``: torch.compile's;
    the tests trace with ``"eager"``, which checks the graph without generating code)."""

    def finish(x: torch.Tensor, params: BatchParams) -> torch.Tensor:
        return augment_resized(x, params, recipe)

    return torch.compile(finish, fullgraph=True, dynamic=False, backend=backend)
