"""The cost of making ImageNet-C corruptions on the fly (``eval.robustness`` without a pre-made
ImageNet-C folder).

1. The whole suite (15 corruptions x 5 severities) on the first N Fashion-MNIST validation images
   (28x28, real, Debian's dataset-fashion-mnist), through the same code a run uses
   (``trainables.evaluation.robustness.corrupted_sets``), with 1 process and with one per core. The
   first process count pays numba's compile of glass_blur; both pay their processes' start.
2. Per-image time of each corruption at 224x224 (scikit-image's sample photographs, severity 3),
   single core, after one warm-up call: from it, on paper, what 50,000 ImageNet validation images
   x 75 settings cost on the CPU cores of a GPU node.

    python benchmarks/bench_robustness.py [--images 1000] [--out BENCHMARKS.md]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import torch
from common import environment
from published import publish

from mjp.keys import CORRUPTIONS
from mjp.robustness import corrupt
from trainables.config.build import build_config
from trainables.data.datasets import fixed_images, load_datasets
from trainables.evaluation.robustness import corrupted_sets

IMAGENET_VAL = 50_000
SETTINGS = 75


def suite_seconds(pixels: torch.Tensor, workers: int) -> float:
    start = time.perf_counter()
    for _ in corrupted_sets(pixels, CORRUPTIONS, seed=0, workers=workers):
        pass
    return time.perf_counter() - start


def photos_224(n: int) -> torch.Tensor:
    from PIL import Image
    from skimage import data

    sources = [getattr(data, name)() for name in ("astronaut", "coffee", "chelsea", "rocket")]
    images = [np.asarray(Image.fromarray(sources[i % len(sources)]).resize((224, 224), Image.BICUBIC)) for i in range(n)]
    return torch.from_numpy(np.stack(images)).permute(0, 3, 1, 2).float() / 255


def per_image_ms_224(images: torch.Tensor) -> dict[str, float]:
    out = {}
    for name in CORRUPTIONS:
        corrupt(images[:1], name, 3, seed=0)  # warm-up: numba compiles glass_blur
        start = time.perf_counter()
        corrupt(images, name, 3, seed=1)
        out[name] = 1e3 * (time.perf_counter() - start) / len(images)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=1000)
    parser.add_argument("--photos", type=int, default=4, help="224 px images timed per corruption")
    parser.add_argument("--out")
    args = parser.parse_args()
    torch.set_num_threads(1)
    cores = os.cpu_count() or 1
    bundle = load_datasets(build_config({"data": {"name": "fashion_mnist"}}))
    images, _ = fixed_images(bundle.val, args.images)
    pixels = bundle.pixels.to_pixels(images)
    one = suite_seconds(pixels, 1)
    many = suite_seconds(pixels, cores)
    ms = per_image_ms_224(photos_224(args.photos))
    per_image_all = sum(ms.values()) * 5 / 1e3  # s per image for all 75 settings (severity 3 as the mean)
    cpu_hours = IMAGENET_VAL * per_image_all / 3600
    slowest = sorted(ms.items(), key=lambda kv: -kv[1])[:3]
    lines = [
        "### bench_robustness: 15 corruptions x 5 severities made on the fly",
        environment(),
        "",
        "| images | processes | wall (s) | images x settings per s |",
        "| ---: | ---: | ---: | ---: |",
        f"| {len(pixels)} Fashion-MNIST 28x28 | 1 | {one:.1f} | {len(pixels) * SETTINGS / one:,.0f} |",
        f"| {len(pixels)} Fashion-MNIST 28x28 | {cores} | {many:.1f} | {len(pixels) * SETTINGS / many:,.0f} |",
        "",
        f"At 224x224, one core, severity 3: {sum(ms.values()):.0f} ms per image for the 15 corruptions "
        f"(slowest: {', '.join(f'{k} {v:.0f} ms' for k, v in slowest)}), so about {per_image_all:.1f} s per image for all 75 settings.",
        "",
        f"On paper, 50,000 ImageNet validation images x 75 settings: {cpu_hours:,.0f} core-hours of corrupting; "
        f"on the 96 vCPUs of an 8-GPU node (p4d: 12 per GPU) about {cpu_hours / 96:.1f} h, while classifying the "
        f"{IMAGENET_VAL * SETTINGS / 1e6:.2f} M images is minutes on the GPUs. A pre-made ImageNet-C folder "
        "(eval.robustness.imagenet_c_root) costs only the reading and the classifying.",
        "",
    ]
    publish(args.out, "\n".join(lines))


if __name__ == "__main__":
    main()
