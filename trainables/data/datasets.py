"""Datasets: digits (bundled), fashion_mnist (IDX files), imagefolder (ImageNet layout), cifar10/100.

``load_datasets(cfg)`` builds the train/val datasets with their transforms. Reading an image folder
(listing, decoding, skipping bad files) is ``trainables.data.folder.image_folder``.
"""

from __future__ import annotations

from collections.abc import Sized
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import numpy as np
import torch
from torch.utils.data import Dataset, Subset

from trainables.config.schema import DataSection, TrainConfig
from trainables.data.digits import digits_csv, load_digits_split
from trainables.data.folder.image_folder import SkippingImages, readable_loader
from trainables.data.idx import FASHION_MNIST_DEFAULT, fashion_files, read_idx
from trainables.data.info import DataShape, data_info, imagefolder_root
from trainables.data.transforms import image_transforms


@dataclass(frozen=True)
class PixelScale:
    """How the model's inputs relate to pixels in [0, 1]: ``input = (pixel - mean) / std`` per channel."""

    mean: tuple[float, ...]
    std: tuple[float, ...]

    def _shape(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        view = (1, -1, 1, 1)
        return torch.tensor(self.mean, device=x.device).view(view), torch.tensor(self.std, device=x.device).view(view)

    def to_pixels(self, x: torch.Tensor) -> torch.Tensor:
        """Model inputs ``[B, C, H, W]`` -> pixels in [0, 1]."""
        mean, std = self._shape(x)
        return (x * std + mean).clamp(0, 1)

    def to_inputs(self, pixels: torch.Tensor) -> torch.Tensor:
        mean, std = self._shape(pixels)
        return (pixels - mean) / std


#: what timm's transforms normalise with (imagefolder, cifar)
IMAGENET_SCALE = PixelScale((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))


@dataclass(frozen=True)
class DatasetBundle:
    train: Dataset
    val: Dataset
    shape: DataShape
    skipped_log: Path | None = None  # data.on_bad_image=skip: where skipped paths are recorded
    pixels: PixelScale = IMAGENET_SCALE


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


def _standardise(train: np.ndarray, *others: np.ndarray) -> tuple[list[torch.Tensor], PixelScale]:
    """Images in [0, 1] standardised with the training set's mean and std (and that scale)."""
    mean, std = float(train.mean()), float(train.std())
    return [torch.from_numpy(((a - mean) / std).astype(np.float32)) for a in (train, *others)], PixelScale((mean,), (std,))


def _digits(cfg: DataSection) -> DatasetBundle:
    images_tr, images_va, y_tr, y_va = load_digits_split()
    (x_tr, x_va), scale = _standardise(images_tr, images_va)
    aug = cfg.augment != "none"
    return DatasetBundle(
        TensorImages(x_tr, torch.from_numpy(y_tr), aug), TensorImages(x_va, torch.from_numpy(y_va)), DataShape(10, 1, 8), pixels=scale
    )


def _fashion_mnist(cfg: DataSection) -> DatasetBundle:
    root = Path(cfg.root or FASHION_MNIST_DEFAULT)
    arrays = {key: read_idx(path, 3 if key.endswith("images") else 1) for key, path in fashion_files(root).items()}
    (x_tr, x_va), scale = _standardise(arrays["train_images"][:, None] / 255.0, arrays["val_images"][:, None] / 255.0)
    aug = cfg.augment != "none"
    y_tr, y_va = (torch.from_numpy(arrays[k].astype(np.int64)) for k in ("train_labels", "val_labels"))
    return DatasetBundle(TensorImages(x_tr, y_tr, aug), TensorImages(x_va, y_va), DataShape(10, 1, 28), pixels=scale)


def _imagefolder(cfg: DataSection) -> DatasetBundle:
    from torchvision.datasets import ImageFolder

    from trainables.data.folder.shards import shard_metadata

    root, size = imagefolder_root(cfg), cfg.img_size or 224
    meta = shard_metadata(root)
    val = ImageFolder(meta["val_root"] if meta else str(root / "val"), transform=image_transforms(cfg, size, False), loader=readable_loader)
    # the Ray Data loader reads the training split itself (trainables/data/ray_data.py)
    if cfg.loader == "ray_data":
        train = val
    elif cfg.decode == "gpu":  # encoded bytes; the training device decodes (trainables/data/gpu/decode.py)
        from trainables.data.gpu.decode import EncodedImages

        train = EncodedImages(root / "train", cfg.train_limit, cfg.on_bad_image)
    else:
        train = ImageFolder(str(root / "train"), transform=image_transforms(cfg, size, True), loader=readable_loader)
    log = None
    if cfg.on_bad_image == "skip":
        from trainables.scratch import folder_for_this_process

        log = folder_for_this_process() / "skipped.txt"
        val = SkippingImages(val, log)
        if cfg.decode == "cpu":
            train = SkippingImages(train, log)
    return DatasetBundle(train, val, DataShape(len(train.classes), 3, size), log)


def _cifar(cfg: DataSection) -> DatasetBundle:
    from torchvision import datasets

    cls = datasets.CIFAR10 if cfg.name == "cifar10" else datasets.CIFAR100
    size = cfg.img_size or 32
    kw = dict(root=cfg.root, download=cfg.download)
    train = cls(train=True, transform=image_transforms(cfg, size, True), **kw)
    val = cls(train=False, transform=image_transforms(cfg, size, False), **kw)
    return DatasetBundle(train, val, DataShape(10 if cfg.name == "cifar10" else 100, 3, size))


def dataset_size(dataset: Dataset) -> int:
    """``len(dataset)``: every dataset here is map-style and has a length, which torch's ``Dataset``
    type leaves out (an ``IterableDataset`` may have none)."""
    return len(cast(Sized, dataset))


def _limit(ds: Dataset, n: int | None) -> Dataset:
    return ds if n is None or n >= dataset_size(ds) else Subset(ds, range(n))


def load_datasets(cfg: TrainConfig) -> DatasetBundle:
    """Train and val datasets for ``cfg.data`` (after ``check_data``)."""
    build = {"digits": _digits, "fashion_mnist": _fashion_mnist, "imagefolder": _imagefolder, "cifar10": _cifar, "cifar100": _cifar}
    bundle = build[cfg.data.name](cfg.data)
    return DatasetBundle(
        _limit(bundle.train, cfg.data.train_limit), _limit(bundle.val, cfg.data.val_limit), bundle.shape, bundle.skipped_log, bundle.pixels
    )


def fixed_images(dataset: Dataset, n: int | None) -> tuple[torch.Tensor, torch.Tensor]:
    """The first ``n`` items of ``dataset`` (all when None): ``[n, C, H, W]``, ``[n]``; the same set every run."""
    count = dataset_size(dataset) if n is None else min(n, dataset_size(dataset))
    items = [dataset[i] for i in range(count)]
    return torch.stack([x for x, _ in items]), torch.tensor([int(y) for _, y in items])


@dataclass(frozen=True)
class DatasetInput:
    """A dataset as MLflow's Dataset column shows it."""

    name: str
    digest: str
    source: str
    profile: dict
    context: str  # "training" | "evaluation"


def dataset_inputs(cfg: TrainConfig, bundle: DatasetBundle) -> list[DatasetInput]:
    """The training and validation splits a run reads: name, size, where from, a digest."""
    import hashlib

    d = cfg.data
    if d.name == "digits":
        source = str(digits_csv())
    elif d.name == "fashion_mnist":
        source = str(Path(d.root or FASHION_MNIST_DEFAULT).resolve())
    else:
        source = str(Path(d.root).resolve()) if d.root else d.name
    out = []
    for split, ds, context in (("train", bundle.train, "training"), ("val", bundle.val, "evaluation")):
        size = dataset_size(ds) if d.loader == "torch" or split == "val" else data_info(cfg).train_size
        limit = d.train_limit if split == "train" else d.val_limit
        digest = hashlib.sha256(f"{d.name}|{source}|{split}|{size}|{limit}|{d.seed if split == 'train' else ''}".encode()).hexdigest()[:16]
        profile = {
            "split": split,
            "num_images": size,
            "image_size": f"{bundle.shape.img_size}x{bundle.shape.img_size}x{bundle.shape.in_chans}",
            "num_classes": bundle.shape.num_classes,
        }
        out.append(DatasetInput(f"{d.name}-{split}", digest, source, profile, context))
    return out
