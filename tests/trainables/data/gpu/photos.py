"""Images for the tests of the device input path (``data.decode: gpu``): smooth random photographs
that JPEG keeps, folders of them, and the device those tests run on (the CPU: the same code that runs
on CUDA)."""

import numpy as np
import torch
from PIL import Image

CPU = torch.device("cpu")


def photo(rng, h, w):
    """A smooth random image (gradients + blobs): JPEG keeps it, unlike white noise."""
    ys, xs = np.mgrid[0:h, 0:w] / max(h, w)
    a, b, c = rng.uniform(0.5, 4, 3)
    img = np.stack([np.sin(a * xs * 6 + c), np.cos(b * ys * 5), np.sin((xs + ys) * c * 4)], -1)
    return ((img + 1) * 127.5).astype(np.uint8)


def jpeg_folder(root, classes=("cat", "dog"), per_class=6, sizes=((40, 52), (48, 36), (33, 33))):
    rng = np.random.default_rng(0)
    for split in ("train", "val"):
        for c in classes:
            (root / split / c).mkdir(parents=True)
            for i in range(per_class):
                h, w = sizes[i % len(sizes)]
                Image.fromarray(photo(rng, h, w)).save(root / split / c / f"{i}.jpg", quality=92)
    return root
