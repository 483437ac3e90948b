"""Images/s per CPU core of decoding + DeiT's training transforms (RandomResizedCrop 224, flip,
RandAugment m9, normalise, random erasing), on a synthetic ImageNet-like folder of real JPEGs:
scikit-image's sample photographs, cut and resized to 500x375 (ImageNet's typical size) and
JPEG-encoded, made on the fly. Measured in one run: the torch DataLoader (one process per core)
and Ray Data (decode-and-augment tasks on a local Ray with as many CPUs), and from those the CPU
cores per GPU that DeiT-S needs at the published single-H100 speeds (bf16, batch 256: about
1,600 img/s eager, 7,700 img/s compiled).

    python benchmarks/bench_data.py [--images 768] [--out BENCHMARKS.md]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np
from common import append, environment

import ray
import torch
from PIL import Image
from torch.utils.data import DataLoader

from trainables.config import build_config
from trainables.data import load_datasets
from trainables.data_ray import train_dataset
from trainables.ray_runtime import console_logs_to, ensure_ray

#: published single-H100 training speed of a 22M-parameter ViT-S, bf16, batch 256 (DESIGN.md)
GPU_IMG_PER_S = {"eager": 1600, "compiled (torch.compile)": 7700}
CLASSES = 8


def photos() -> list[np.ndarray]:
    from skimage import data

    names = ("astronaut", "coffee", "chelsea", "rocket", "hubble_deep_field", "immunohistochemistry", "retina", "cat")
    return [getattr(data, n)() for n in names if hasattr(data, n)]


def make_folder(root: Path, n: int, seed: int = 0) -> Path:
    """``n`` training JPEGs of 500x375 in ``CLASSES`` classes (and a small val split)."""
    rng = np.random.default_rng(seed)
    sources = [p for p in photos() if p.ndim == 3 and p.shape[2] == 3]
    for split, count in (("train", n), ("val", CLASSES)):
        for i in range(count):
            src = sources[i % len(sources)]
            h, w = src.shape[:2]
            top, left = rng.integers(0, max(1, h // 4)), rng.integers(0, max(1, w // 4))
            crop = Image.fromarray(src[top : top + 3 * h // 4, left : left + 3 * w // 4]).resize((500, 375), Image.BICUBIC)
            folder = root / split / f"c{i % CLASSES}"
            folder.mkdir(parents=True, exist_ok=True)
            crop.save(folder / f"{i}.jpg", quality=90)
    return root


def config(root: Path, loader: str):
    return build_config({"data": {"name": "imagefolder", "root": str(root), "img_size": 224, "augment": "deit", "loader": loader, "batch_size": 64}})


def dataloader_rate(root: Path, workers: int) -> float:
    bundle = load_datasets(config(root, "torch"))
    loader = DataLoader(bundle.train, batch_size=64, num_workers=workers, shuffle=True, persistent_workers=workers > 0)
    next(iter(loader))  # start the workers before the clock
    start, seen = time.perf_counter(), 0
    for x, _ in loader:
        seen += x.shape[0]
    return seen / (time.perf_counter() - start)


def ray_data_rate(root: Path, cores: int) -> float:
    ensure_ray(num_cpus=cores)
    ds = train_dataset(config(root, "ray_data"))
    it = ds.iterator()
    for _ in it.iter_torch_batches(batch_size=64):  # a first epoch: Ray Data's workers start
        pass
    start, seen = time.perf_counter(), 0
    for batch in it.iter_torch_batches(batch_size=64):
        seen += batch["image"].shape[0]
    return seen / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=768)
    parser.add_argument("--out")
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        console_logs_to(Path(tmp) / "ray.log")
        root = make_folder(Path(tmp) / "imagenet", args.images)
        one = dataloader_rate(root, 0)
        many = dataloader_rate(root, cores)
        rd = ray_data_rate(root, cores)
    ray.shutdown()
    per_core = {"DataLoader, 1 process": one, f"DataLoader, {cores} worker processes": many / cores, f"Ray Data, {cores} CPUs": rd / cores}
    best = max(per_core.values())
    lines = [
        f"### bench_data: decode + DeiT train transforms, {args.images} JPEGs of 500x375, 224 px crops",
        environment(),
        "",
        "| pipeline | img/s | img/s per core |",
        "| --- | ---: | ---: |",
        f"| DataLoader, 1 process | {one:.0f} | {one:.0f} |",
        f"| DataLoader, {cores} worker processes | {many:.0f} | {many / cores:.0f} |",
        f"| Ray Data, {cores} CPUs | {rd:.0f} | {rd / cores:.0f} |",
        "",
        f"CPU cores one GPU needs to be fed, at {best:.0f} img/s per core (the best above), on paper:",
        "",
        "| DeiT-S on one H100, bf16 | GPU img/s | cores per GPU | cores for an 8-GPU node |",
        "| --- | ---: | ---: | ---: |",
        *[f"| {name} | {rate:,} | {rate / best:.0f} | {8 * rate / best:.0f} |" for name, rate in GPU_IMG_PER_S.items()],
        "",
    ]
    append(args.out, "\n".join(lines))


if __name__ == "__main__":
    main()
