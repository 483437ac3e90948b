"""Step: ``data.decode: gpu`` from JPEG files it generates (smooth random images at quality 90, in
10 classes): the host-to-device copy of the encoded bytes, the batched decode and DeiT's
augmentation (``device_augment``, eager and, on CUDA, with the work after the crop compiled as
``runtime.compile`` does) as stages, then whole epochs of the loader (workers read bytes, the device
decodes and augments; compiled on CUDA, as the step is) alone and feeding the row-J training step."""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.gpu_check.context import Sizes, best_seconds, device_of, sizes, step_args, synchronize, write_result
from benchmarks.gpu_check.engine_step import FixedBatches, engine_state, fixed_batch


def make_jpegs(root: Path, s: Sizes, classes: int = 10) -> Path:
    """``s.jpegs`` JPEGs of ``s.jpeg_hw`` under ``root/train/c<k>/``: low-frequency colour plus noise,
    so they compress like photographs rather than like noise or flat colour."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    h, w = s.jpeg_hw
    for i in range(s.jpegs):
        folder = root / "train" / f"c{i % classes}"
        folder.mkdir(parents=True, exist_ok=True)
        small = Image.fromarray(rng.integers(0, 256, (max(2, h // 16), max(2, w // 16), 3), dtype=np.uint8)).resize((w, h), Image.BICUBIC)
        noisy = np.asarray(small).astype(np.int16) + rng.integers(-20, 21, (h, w, 3))
        Image.fromarray(noisy.clip(0, 255).astype(np.uint8)).save(folder / f"{i}.JPEG", quality=90)
    return root / "train"


def rate(fn: Callable[[], Any], images: int, device: Any, repeat: int = 3) -> float:
    """img/s of ``fn`` on ``images`` images, the best of ``repeat`` after one warm-up call."""
    return images / best_seconds(fn, device, repeat)


def stages(train: Path, s: Sizes, device: Any) -> dict[str, float | None]:
    """img/s of the copy, the decode and the augmentation of one batch, each alone."""
    import torch

    from trainables.data.gpu.augment import DeviceRecipe, augment_batch
    from trainables.data.gpu.compiled import CompiledAugment
    from trainables.data.gpu.decode import decode_on_device, read_encoded

    files = sorted(train.glob("*/*.JPEG"))[: s.batch]
    encoded = [read_encoded(str(f)) for f in files]
    pinned = [e.pin_memory() for e in encoded] if device.type == "cuda" else encoded
    decoded = decode_on_device(pinned, device)
    seeds, recipe, n = list(range(len(files))), DeviceRecipe(s.img_size, "deit"), len(files)
    finish = CompiledAugment(recipe) if device.type == "cuda" else None  # Inductor on the CPU: minutes of compiling
    return {
        "h2d_img_s": rate(lambda: [p.to(device, non_blocking=True) for p in pinned], n, device) if device.type == "cuda" else None,
        "decode_img_s": rate(lambda: decode_on_device(pinned, device), n, device),
        "augment_img_s": rate(lambda: augment_batch(decoded, seeds, recipe), n, device),
        "augment_compiled_img_s": rate(lambda: augment_batch(decoded, seeds, recipe, finish), n, device) if finish else None,
        "images": n,
        "decoder": "nvJPEG (decode_jpeg on cuda)" if device.type == "cuda" else "decode_jpeg on the CPU",
        "torch_threads": torch.get_num_threads(),
    }


def device_loader(train: Path, s: Sizes, device: Any, workers: int) -> Any:
    """The loader ``data.decode: gpu`` builds (``trainables.data.loaders``), over the generated folder."""
    import torch
    from torch.utils.data import DataLoader, RandomSampler

    from trainables.data.gpu.augment import DeviceRecipe
    from trainables.data.gpu.decode import DeviceAugmentLoader, EncodedImages, SeededSampler, collate_encoded

    dataset = EncodedImages(train)
    sampler = SeededSampler(RandomSampler(dataset, generator=torch.Generator().manual_seed(0)), 0)
    loader = DataLoader(
        dataset,
        sampler=sampler,
        batch_size=s.batch,
        collate_fn=collate_encoded,
        pin_memory=device.type == "cuda",
        num_workers=workers,
        persistent_workers=workers > 0,
        drop_last=True,
        prefetch_factor=4 if workers else None,
    )
    recipe = DeviceRecipe(s.img_size, "deit")
    backend = "inductor" if device.type == "cuda" else None  # as runtime.compile builds it
    return DeviceAugmentLoader(loader, sampler, recipe, device, dataset, compile_backend=backend)


def loader_epochs(loader: Any, s: Sizes, device: Any) -> list[float]:
    """img/s of each whole epoch (the first one starts the workers)."""
    rates = []
    for epoch in range(s.loader_epochs):
        loader.set_epoch(epoch)
        start, n = time.perf_counter(), 0
        for x, _ in loader:
            n += x.shape[0]
        synchronize(device)
        rates.append(n / (time.perf_counter() - start))
    return rates


def with_step(loader: Any, s: Sizes, device: Any) -> dict[str, Any]:
    """Row J's training step fed by the loader: img/s and the share of time spent waiting for data."""
    from trainables.train.engine import train_one_epoch

    compiled = device.type == "cuda"
    cfg, state = engine_state(s, "J", compiled, device)
    x, y = fixed_batch(s, device)
    train_one_epoch(cfg, state, FixedBatches(x, y, s.warmup), device)
    epochs = []
    for epoch in range(2):
        loader.set_epoch(100 + epoch)
        r = train_one_epoch(cfg, state, loader, device)
        epochs.append({"img_s": r["perf/img_per_s"], "data_wait_frac": r["perf/data_wait_frac"]})
    return {"compiled": compiled, "epochs": epochs}


def main() -> None:
    args = step_args(__doc__)
    s = sizes(args.mode)
    device = device_of(s)
    workers = max(1, min(12, (os.cpu_count() or 2) - 2)) if device.type == "cuda" else 1
    with tempfile.TemporaryDirectory(prefix="gpu-check-jpegs-") as tmp:
        start = time.perf_counter()
        train = make_jpegs(Path(tmp), s)
        made_s = time.perf_counter() - start
        result: dict[str, Any] = {"jpegs": s.jpegs, "jpeg_hw": s.jpeg_hw, "made_in_s": made_s, "workers": workers, "batch": s.batch}
        result["stages"] = stages(train, s, device)
        loader = device_loader(train, s, device, workers)
        result["loader_img_s"] = loader_epochs(loader, s, device)
        result["with_step"] = with_step(loader, s, device)
    write_result(args.out, result, s)


if __name__ == "__main__":
    from trainables.process_end import run_and_exit

    run_and_exit(main)  # no finalization (1.5 s of CPU after torch and timm): the next step starts sooner
