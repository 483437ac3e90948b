"""Fashion-MNIST's IDX files: where they are looked for, their headers read and checked, their
images and labels read (gzip or not) without torchvision's downloader."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np

from trainables.errors import DataError

FASHION_MNIST_DEFAULT = "/usr/share/datasets/fashion-mnist"


FASHION_MNIST_FILES = {
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "val_images": "t10k-images-idx3-ubyte",
    "val_labels": "t10k-labels-idx1-ubyte",
}


def _idx_header(head: bytes, path: Path, ndim: int) -> tuple[int, ...]:
    """The shape an IDX file declares; ``DataError`` unless it is unsigned bytes of ``ndim`` dims."""
    if len(head) < 4 or head[0] != 0 or head[1] != 0 or head[2] != 0x08 or head[3] != ndim:
        raise DataError(
            f"{path} is not an IDX file of {ndim}-D unsigned bytes (bad magic number {head[:4].hex() or 'none'}); re-download it"
        )
    if len(head) < 4 + 4 * ndim:
        raise DataError(f"{path}: the IDX header is truncated")
    return tuple(int.from_bytes(head[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))


def read_idx(path: Path, ndim: int | None = None) -> np.ndarray:
    try:
        with gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb") as fh:
            data = fh.read()
    except (OSError, EOFError) as err:  # gzip.BadGzipFile is an OSError
        raise DataError(f"cannot read {path}: {err}") from None
    shape = _idx_header(data[:16], path, ndim if ndim is not None else (data[3] if len(data) > 3 else 0))
    body = len(data) - 4 - 4 * len(shape)
    if body != int(np.prod(shape)):
        raise DataError(f"{path} declares {shape} bytes of images/labels but holds {body}; the file is truncated or corrupt")
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * len(shape)).reshape(shape)


def _idx_file(root: Path, stem: str) -> Path | None:
    for name in (stem, stem + ".gz"):
        if (root / name).is_file():
            return root / name
    return None


def fashion_files(root: Path) -> dict[str, Path]:
    found = {key: _idx_file(root, stem) for key, stem in FASHION_MNIST_FILES.items()}
    missing = [FASHION_MNIST_FILES[k] for k, p in found.items() if p is None]
    if missing:
        raise DataError(
            f"fashion_mnist: {', '.join(missing)} not found in data.root={str(root)!r}. "
            "Install Debian's package (apt-get install dataset-fashion-mnist, which puts them in "
            f"{FASHION_MNIST_DEFAULT}) or point data.root at a directory holding the four IDX files"
        )
    return {key: path for key, path in found.items() if path is not None}  # all four, none missing


def fashion_sizes(root: Path) -> dict[str, int]:
    """Items per IDX file, read and checked whole (magic number, declared size, labels 0-9);
    images and labels of a split must agree."""
    arrays = {key: read_idx(path, 3 if key.endswith("images") else 1) for key, path in fashion_files(root).items()}
    for key, array in arrays.items():
        path = _idx_file(root, FASHION_MNIST_FILES[key])
        if key.endswith("images") and array.shape[1:] != (28, 28):
            raise DataError(f"{path}: images are {array.shape[1]}x{array.shape[2]}; Fashion-MNIST's are 28x28")
        if key.endswith("labels") and array.max(initial=0) > 9:
            raise DataError(f"{path}: labels go up to {array.max()}; Fashion-MNIST has 10 classes (0-9)")
    sizes = {key: len(array) for key, array in arrays.items()}
    for split in ("train", "val"):
        if sizes[f"{split}_images"] != sizes[f"{split}_labels"]:
            raise DataError(f"fashion_mnist in {root}: {sizes[split + '_images']} {split} images but {sizes[split + '_labels']} labels")
    return sizes
