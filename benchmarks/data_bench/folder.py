"""bench_data's data: a synthetic ImageNet-like folder of real JPEGs (scikit-image's sample
photographs, cut and resized to 500x375, ImageNet's typical size), made on the fly, and the
training config that reads it (DeiT's training transforms at 224 px, batch ``BATCH``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

from trainables.config.build import build_config

CLASSES = 8
BATCH = 64


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


def config(root: Path, loader: str, decode: str = "cpu"):
    return build_config(
        {
            "data": {
                "name": "imagefolder",
                "root": str(root),
                "img_size": 224,
                "augment": "deit",
                "loader": loader,
                "decode": decode,
                "batch_size": BATCH,
            }
        }
    )
