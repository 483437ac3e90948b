"""bench_data, part 2: the host budget of ``data.decode: gpu`` per batch, on the CPU: aten ops and
main-thread CPU ms of ``augment_batch`` at B = 256 and 512 (issue cost: tiny images), main-process
CPU ms to receive a batch of 256 from 2 loader workers as one flat buffer (``EncodedBatch``) and as
one tensor per image (the layout before), and (with CUDA) to pin each."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.data import DataLoader

from trainables.data.gpu.augment import DeviceRecipe, augment_batch, draw_sample
from trainables.data.gpu.decode import SeededSampler, collate_encoded


class _InMemoryJpegs(torch.utils.data.Dataset):
    """``EncodedImages``' items from bytes held in memory, so the workers' file reads do not count."""

    def __init__(self, blobs: list[bytes]):
        self.blobs = blobs

    def __len__(self) -> int:
        return 1 << 30

    def __getitem__(self, key: tuple[int, int]) -> tuple[torch.Tensor, int, int, int]:
        index, seed = key
        return torch.frombuffer(bytearray(self.blobs[index % len(self.blobs)]), dtype=torch.uint8), 0, seed, index


def collate_as_list(items: list[tuple[torch.Tensor, int, int, int]]) -> tuple[list[torch.Tensor], torch.Tensor, torch.Tensor, torch.Tensor]:
    """The layout before ``EncodedBatch``: one tensor (one shared-memory segment) per image."""
    data, labels, seeds, indices = zip(*items)
    return list(data), torch.tensor(labels), torch.tensor(seeds), torch.tensor(indices)


def handover_ms(blobs: list[bytes], batch: int, collate: Callable[[list], Any], batches: int = 6) -> float:
    """Main-thread CPU ms to receive one batch from 2 loader workers (unpickling, shared memory)."""
    sampler = SeededSampler(list(range(batch * (batches + 1))), 0)
    loader = DataLoader(_InMemoryJpegs(blobs), sampler=sampler, batch_size=batch, collate_fn=collate, num_workers=2, prefetch_factor=2)
    it = iter(loader)
    next(it)  # workers started
    spent = []
    for _ in range(batches):
        start = time.thread_time()
        next(it)
        spent.append(time.thread_time() - start)
    return 1e3 * statistics.median(spent)


def pin_ms(blobs: list[bytes], batch: int, flat: bool) -> float | None:
    """Main-process CPU ms to pin one batch: the flat buffer + header, or one tensor per image."""
    if not torch.cuda.is_available():
        return None
    items = [(torch.frombuffer(bytearray(blobs[i % len(blobs)]), dtype=torch.uint8), 0, i, i) for i in range(batch)]
    tensors = list(collate_encoded(items)) if flat else collate_as_list(items)[0]
    [t.pin_memory() for t in tensors]  # warm the caching host allocator
    start = time.thread_time()
    [t.pin_memory() for t in tensors]
    return 1e3 * (time.thread_time() - start)


class _OpCount(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.ops = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        self.ops += 1
        return func(*args, **(kwargs or {}))


def augment_host_cost(batch: int, device: str) -> tuple[int, float]:
    """(aten ops, main-thread CPU ms) of ``augment_batch`` on one batch. On the CPU the images are
    tiny (16 px crops of ~24 px images), so the time is what issuing the ops and drawing the
    samples' random choices costs; on CUDA, 224 px from 500x375, kernels queued, not awaited."""
    dev = torch.device(device)
    size, shape = (224, (3, 375, 500)) if dev.type == "cuda" else (16, (3, 22, 26))
    gen = torch.Generator().manual_seed(batch)
    images = [torch.randint(0, 256, shape, dtype=torch.uint8, generator=gen).to(dev) for _ in range(batch)]
    recipe = DeviceRecipe(size, "deit")
    with _OpCount() as count:
        augment_batch(images, list(range(batch)), recipe)
    spent = []
    for r in range(5):
        if dev.type == "cuda":
            torch.cuda.synchronize()
        start = time.thread_time()
        augment_batch(images, [r * batch + i for i in range(batch)], recipe)
        spent.append(time.thread_time() - start)
    return count.ops, 1e3 * statistics.median(spent)


def host_budget(root: Path, device: str) -> list[tuple[str, int, int | None, float | None]]:
    """(stage, B, ops per batch, main-process CPU ms per batch) rows."""
    blobs = [f.read_bytes() for f in sorted(root.glob("train/*/*.jpg"))[:64]]
    recipe = DeviceRecipe(224, "deit")
    start = time.thread_time()
    [draw_sample(seed, 375, 500, recipe) for seed in range(256)]
    rows: list[tuple[str, int, int | None, float | None]] = [
        ("random choices (Python, per sample)", 256, 0, 1e3 * (time.thread_time() - start))
    ]
    for batch in (256, 512):
        ops, ms = augment_host_cost(batch, "cpu")
        rows.append(("augment (device_augment incl. its choices; CPU tensors at 16 px: issue + tiny kernels)", batch, ops, ms))
    if device == "cuda" and torch.cuda.is_available():
        ops, ms = augment_host_cost(256, "cuda")
        rows.append(("augment issue (device_augment, CUDA, 224 px)", 256, ops, ms))
    rows += [
        ("handover: one flat buffer + header (EncodedBatch)", 256, None, handover_ms(blobs, 256, collate_encoded)),
        ("handover: one tensor per image (the layout before)", 256, None, handover_ms(blobs, 256, collate_as_list)),
        ("pin: one flat buffer + header", 256, None, pin_ms(blobs, 256, True)),
        ("pin: one tensor per image (the layout before)", 256, None, pin_ms(blobs, 256, False)),
    ]
    return rows
