"""Datasets: digits (bundled), fashion_mnist (IDX files), imagefolder (ImageNet layout), cifar10/100.

``check_data(cfg)`` runs before Ray starts and fails with a message saying what is missing and how
to get it; ``load_datasets(cfg)`` builds the train/val datasets with their transforms.
"""

from __future__ import annotations

import gzip
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset, Subset

from trainables.config import DataSection, TrainConfig

FASHION_MNIST_DEFAULT = "/usr/share/datasets/fashion-mnist"
FASHION_MNIST_FILES = {
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "val_images": "t10k-images-idx3-ubyte",
    "val_labels": "t10k-labels-idx1-ubyte",
}
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")


class DataError(ValueError):
    """The data a config asks for is missing or broken; the message says where and what to do."""


@dataclass(frozen=True)
class DataShape:
    """What the model must match: classes, channels, image side."""

    num_classes: int
    in_chans: int
    img_size: int


@dataclass(frozen=True)
class DatasetBundle:
    train: Dataset
    val: Dataset
    shape: DataShape


class TensorImages(Dataset):
    """In-memory images ``[N, C, H, W]`` (float, normalised) with labels ``[N]``; optional small augmentation."""

    def __init__(self, images: torch.Tensor, labels: torch.Tensor, augment: bool = False):
        self.images, self.labels, self.augment = images, labels.long(), augment
        self.pad = max(1, images.shape[-1] // 8)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.images[i]
        if self.augment:  # random translation by up to 1/8 of the side (zero padding = background)
            h, w = x.shape[-2:]
            padded = torch.nn.functional.pad(x, (self.pad,) * 4, value=float(x.min()))
            dy, dx = torch.randint(0, 2 * self.pad + 1, (2,)).tolist()
            x = padded[:, dy : dy + h, dx : dx + w]
        return x, self.labels[i]


def _standardise(train: np.ndarray, *others: np.ndarray) -> list[torch.Tensor]:
    mean, std = float(train.mean()), float(train.std())
    return [torch.from_numpy(((a - mean) / std).astype(np.float32)) for a in (train, *others)]


def _digits(cfg: DataSection) -> DatasetBundle:
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    images = digits.images.astype(np.float32)[:, None] / 16.0  # [1797, 1, 8, 8]
    x_tr, x_va, y_tr, y_va = train_test_split(images, digits.target, test_size=0.2, random_state=0, stratify=digits.target)
    x_tr, x_va = _standardise(x_tr, x_va)
    aug = cfg.augment != "none"
    return DatasetBundle(TensorImages(x_tr, torch.from_numpy(y_tr), aug), TensorImages(x_va, torch.from_numpy(y_va)), DataShape(10, 1, 8))


def _read_idx(path: Path) -> np.ndarray:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as fh:
        data = fh.read()
    dims = data[3]
    shape = tuple(int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(dims))
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def _idx_file(root: Path, stem: str) -> Path | None:
    for name in (stem, stem + ".gz"):
        if (root / name).is_file():
            return root / name
    return None


def _fashion_mnist(cfg: DataSection) -> DatasetBundle:
    root = Path(cfg.root or FASHION_MNIST_DEFAULT)
    arrays = {key: _read_idx(_idx_file(root, stem)) for key, stem in FASHION_MNIST_FILES.items()}
    x_tr, x_va = _standardise(arrays["train_images"][:, None] / 255.0, arrays["val_images"][:, None] / 255.0)
    aug = cfg.augment != "none"
    y_tr, y_va = (torch.from_numpy(arrays[k].astype(np.int64)) for k in ("train_labels", "val_labels"))
    return DatasetBundle(TensorImages(x_tr, y_tr, aug), TensorImages(x_va, y_va), DataShape(10, 1, 28))


def _readable_loader(path: str):
    from PIL import Image

    try:
        with open(path, "rb") as fh:
            return Image.open(fh).convert("RGB")
    except Exception as err:  # PIL raises many kinds; every one means this file is unusable
        raise DataError(f"cannot read image {path}: {err}") from err


def _image_transforms(cfg: DataSection, img_size: int, train: bool):
    from timm.data import create_transform

    if cfg.augment == "deit" and train:
        return create_transform(img_size, is_training=True, auto_augment="rand-m9-mstd0.5-inc1", re_prob=0.25, interpolation="bicubic")
    if cfg.augment == "small" and train:
        return create_transform(img_size, is_training=True, auto_augment=None, re_prob=0.0, color_jitter=None, interpolation="bicubic")
    return create_transform(img_size, is_training=False, interpolation="bicubic", crop_pct=0.875 if img_size >= 64 else 1.0)


def _imagefolder(cfg: DataSection) -> DatasetBundle:
    from torchvision.datasets import ImageFolder

    root, size = Path(cfg.root), cfg.img_size or 224
    train = ImageFolder(str(root / "train"), transform=_image_transforms(cfg, size, True), loader=_readable_loader)
    val = ImageFolder(str(root / "val"), transform=_image_transforms(cfg, size, False), loader=_readable_loader)
    return DatasetBundle(train, val, DataShape(len(train.classes), 3, size))


def _cifar(cfg: DataSection) -> DatasetBundle:
    from torchvision import datasets

    cls = datasets.CIFAR10 if cfg.name == "cifar10" else datasets.CIFAR100
    size = cfg.img_size or 32
    kw = dict(root=cfg.root, download=cfg.download)
    train = cls(train=True, transform=_image_transforms(cfg, size, True), **kw)
    val = cls(train=False, transform=_image_transforms(cfg, size, False), **kw)
    return DatasetBundle(train, val, DataShape(10 if cfg.name == "cifar10" else 100, 3, size))


def _check_imagefolder(root: Path) -> None:
    classes = {}
    for split in ("train", "val"):
        d = root / split
        if not d.is_dir():
            raise DataError(f"data.root={str(root)!r}: missing {split}/ (expected {root}/train/<class>/*.jpg and {root}/val/<class>/*.jpg)")
        folders = sorted(p for p in d.iterdir() if p.is_dir())
        if not folders:
            raise DataError(f"{d} has no class folders")
        empty = [p.name for p in folders if not any(f.suffix.lower() in IMAGE_EXTENSIONS for f in p.iterdir())]
        if empty:
            raise DataError(f"{d}: class folders without images: {', '.join(empty[:10])}")
        classes[split] = [p.name for p in folders]
    if classes["train"] != classes["val"]:
        only_train = sorted(set(classes["train"]) - set(classes["val"]))
        only_val = sorted(set(classes["val"]) - set(classes["train"]))
        raise DataError(f"{root}: train and val classes differ (only in train: {only_train[:10]}, only in val: {only_val[:10]})")


def check_data(cfg: TrainConfig) -> None:
    """Fail early, before Ray starts, when the configured data cannot be found."""
    data = cfg.data
    if data.name == "fashion_mnist":
        root = Path(data.root or FASHION_MNIST_DEFAULT)
        missing = [stem for stem in FASHION_MNIST_FILES.values() if _idx_file(root, stem) is None]
        if missing:
            raise DataError(
                f"fashion_mnist: {', '.join(missing)} not found in data.root={str(root)!r}. "
                "Install Debian's package (apt-get install dataset-fashion-mnist, which puts them in "
                f"{FASHION_MNIST_DEFAULT}) or point data.root at a directory holding the four IDX files"
            )
    elif data.name == "imagefolder":
        if not data.root:
            raise DataError("data.name='imagefolder' needs data.root (a directory with train/ and val/)")
        _check_imagefolder(Path(data.root))
    elif data.name in ("cifar10", "cifar100"):
        if not data.root:
            raise DataError(f"data.name={data.name!r} needs data.root (where torchvision keeps it)")
        marker = "cifar-10-batches-py" if data.name == "cifar10" else "cifar-100-python"
        if not data.download and not (Path(data.root) / marker).is_dir():
            raise DataError(f"{data.name} not found in {data.root}/{marker}; set data.download=true to fetch it (needs internet)")


def _limit(ds: Dataset, n: int | None) -> Dataset:
    return ds if n is None or n >= len(ds) else Subset(ds, range(n))


def load_datasets(cfg: TrainConfig) -> DatasetBundle:
    """Train and val datasets for ``cfg.data`` (after ``check_data``)."""
    build = {"digits": _digits, "fashion_mnist": _fashion_mnist, "imagefolder": _imagefolder, "cifar10": _cifar, "cifar100": _cifar}
    bundle = build[cfg.data.name](cfg.data)
    return DatasetBundle(_limit(bundle.train, cfg.data.train_limit), _limit(bundle.val, cfg.data.val_limit), bundle.shape)


def data_shape(cfg: TrainConfig) -> DataShape:
    """The data's shape without loading it (after ``check_data``)."""
    d = cfg.data
    if d.name == "digits":
        return DataShape(10, 1, 8)
    if d.name == "fashion_mnist":
        return DataShape(10, 1, 28)
    if d.name == "imagefolder":
        return DataShape(sum(p.is_dir() for p in (Path(d.root) / "train").iterdir()), 3, d.img_size or 224)
    return DataShape(10 if d.name == "cifar10" else 100, 3, d.img_size or 32)
