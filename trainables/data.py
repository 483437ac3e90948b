"""Datasets: digits (bundled), fashion_mnist (IDX files), imagefolder (ImageNet layout), cifar10/100.

``check_data(cfg)`` runs before Ray starts and fails with a message saying what is missing or
broken and how to fix it; ``data_info(cfg)`` gives sizes and image shape without loading;
``load_datasets(cfg)`` builds the train/val datasets with their transforms. Reading an image folder
(listing, decoding, skipping bad files) is ``trainables.image_folder``.
"""

from __future__ import annotations

import gzip
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset, Subset

from trainables.config import DataSection, TrainConfig
from trainables.errors import DataError
from trainables.image_folder import SkippingImages, readable_loader, scan_imagefolder

FASHION_MNIST_DEFAULT = "/usr/share/datasets/fashion-mnist"
FASHION_MNIST_FILES = {
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "val_images": "t10k-images-idx3-ubyte",
    "val_labels": "t10k-labels-idx1-ubyte",
}
#: scikit-learn's digits (1,797 images) split 80/20, stratified, fixed
DIGITS_TRAIN, DIGITS_VAL = 1437, 360


@dataclass(frozen=True)
class DataShape:
    """What the model must match: classes, channels, image side."""

    num_classes: int
    in_chans: int
    img_size: int


@dataclass(frozen=True)
class DataInfo:
    """What pre-flight needs: the shape and the split sizes (before limits)."""

    shape: DataShape
    train_size: int
    val_size: int


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
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    images = digits.images.astype(np.float32)[:, None] / 16.0  # [1797, 1, 8, 8]
    x_tr, x_va, y_tr, y_va = train_test_split(images, digits.target, test_size=0.2, random_state=0, stratify=digits.target)
    (x_tr, x_va), scale = _standardise(x_tr, x_va)
    aug = cfg.augment != "none"
    return DatasetBundle(TensorImages(x_tr, torch.from_numpy(y_tr), aug), TensorImages(x_va, torch.from_numpy(y_va)), DataShape(10, 1, 8), pixels=scale)


def _idx_header(head: bytes, path: Path, ndim: int) -> tuple[int, ...]:
    """The shape an IDX file declares; ``DataError`` unless it is unsigned bytes of ``ndim`` dims."""
    if len(head) < 4 or head[0] != 0 or head[1] != 0 or head[2] != 0x08 or head[3] != ndim:
        raise DataError(f"{path} is not an IDX file of {ndim}-D unsigned bytes (bad magic number {head[:4].hex() or 'none'}); re-download it")
    if len(head) < 4 + 4 * ndim:
        raise DataError(f"{path}: the IDX header is truncated")
    return tuple(int.from_bytes(head[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))


def _read_idx(path: Path, ndim: int | None = None) -> np.ndarray:
    try:
        with (gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")) as fh:
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


def _fashion_mnist(cfg: DataSection) -> DatasetBundle:
    root = Path(cfg.root or FASHION_MNIST_DEFAULT)
    arrays = {key: _read_idx(path, 3 if key.endswith("images") else 1) for key, path in _fashion_files(root).items()}
    (x_tr, x_va), scale = _standardise(arrays["train_images"][:, None] / 255.0, arrays["val_images"][:, None] / 255.0)
    aug = cfg.augment != "none"
    y_tr, y_va = (torch.from_numpy(arrays[k].astype(np.int64)) for k in ("train_labels", "val_labels"))
    return DatasetBundle(TensorImages(x_tr, y_tr, aug), TensorImages(x_va, y_va), DataShape(10, 1, 28), pixels=scale)


#: DeiT's RandAugment magnitudes are N(9, 0.5) clipped to [0, 10]. At 10 its increasing posterize
#: keeps 4 - int(10 / 10 * 4) = 0 bits: older Pillow made that a black image, Pillow >= 11 raises
#: "bits must be between or equal to 1 and 8" (about 1 image in 300, so nearly every ImageNet
#: epoch). Clipping just below 10 keeps one bit there and leaves every other op as it was.
RAND_AUGMENT_MAX_MAGNITUDE = 9.999


def _cap_rand_augment(transform: Any) -> Any:
    """``transform`` with its RandAugment ops' magnitude capped at ``RAND_AUGMENT_MAX_MAGNITUDE``."""
    from timm.data.auto_augment import RandAugment

    for step in getattr(transform, "transforms", []):
        if isinstance(step, RandAugment):
            for op in step.ops:
                op.magnitude_max = RAND_AUGMENT_MAX_MAGNITUDE
    return transform


def image_transforms(cfg: DataSection, img_size: int, train: bool):
    """timm's transform for ``cfg.augment`` (DeiT's recipe, a small one, or the eval resize + crop).
    DeiT erases with per-pixel normal noise (``re_mode="pixel"``), as ``data.decode: gpu`` does."""
    from timm.data import create_transform

    if cfg.augment == "deit" and train:
        return _cap_rand_augment(create_transform(img_size, is_training=True, auto_augment="rand-m9-mstd0.5-inc1", re_prob=0.25, re_mode="pixel", interpolation="bicubic"))
    if cfg.augment == "small" and train:
        return create_transform(img_size, is_training=True, auto_augment=None, re_prob=0.0, color_jitter=None, interpolation="bicubic")
    return create_transform(img_size, is_training=False, interpolation="bicubic", crop_pct=0.875 if img_size >= 64 else 1.0)


def _imagefolder(cfg: DataSection) -> DatasetBundle:
    from torchvision.datasets import ImageFolder

    from trainables.shards import shard_metadata

    root, size = Path(cfg.root), cfg.img_size or 224
    meta = shard_metadata(root)
    val = ImageFolder(meta["val_root"] if meta else str(root / "val"), transform=image_transforms(cfg, size, False), loader=readable_loader)
    # the Ray Data loader reads the training split itself (trainables/data_ray.py)
    if cfg.loader == "ray_data":
        train = val
    elif cfg.decode == "gpu":  # encoded bytes; the training device decodes (trainables/data_gpu.py)
        from trainables.data_gpu import EncodedImages

        train = EncodedImages(root / "train", cfg.train_limit, cfg.on_bad_image)
    else:
        train = ImageFolder(str(root / "train"), transform=image_transforms(cfg, size, True), loader=readable_loader)
    log = None
    if cfg.on_bad_image == "skip":
        import tempfile

        log = Path(tempfile.mkdtemp(prefix="mjp-skipped-")) / "skipped.txt"
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


def _fashion_files(root: Path) -> dict[str, Path]:
    found = {key: _idx_file(root, stem) for key, stem in FASHION_MNIST_FILES.items()}
    missing = [FASHION_MNIST_FILES[k] for k, p in found.items() if p is None]
    if missing:
        raise DataError(
            f"fashion_mnist: {', '.join(missing)} not found in data.root={str(root)!r}. "
            "Install Debian's package (apt-get install dataset-fashion-mnist, which puts them in "
            f"{FASHION_MNIST_DEFAULT}) or point data.root at a directory holding the four IDX files"
        )
    return found


def _fashion_sizes(root: Path) -> dict[str, int]:
    """Items per IDX file, read and checked whole (magic number, declared size, labels 0-9);
    images and labels of a split must agree."""
    arrays = {key: _read_idx(path, 3 if key.endswith("images") else 1) for key, path in _fashion_files(root).items()}
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


def check_data(cfg: TrainConfig) -> None:
    """Fail early, before Ray starts, when the configured data is missing or broken."""
    data_info(cfg)


def data_info(cfg: TrainConfig) -> DataInfo:
    """Shape and split sizes of the configured data, without loading it; ``DataError`` when the
    data is missing or broken (unreadable headers, zero-byte images, a layout that does not fit)."""
    d = cfg.data
    if d.root is not None and d.name == "digits":
        raise DataError(f"data.root={d.root!r} is given, but data.name='digits' is bundled with scikit-learn and reads no directory; drop data.root or pick fashion_mnist / imagefolder / cifar10")
    if d.decode == "gpu" and d.name != "imagefolder":
        raise DataError(f"data.decode='gpu' decodes image files on the training device; data.name={d.name!r} is decoded in memory already: use data.decode=cpu (gpu needs data.name=imagefolder)")
    if d.decode == "gpu" and d.loader == "ray_data":
        raise DataError("data.decode='gpu' ships encoded images through the torch loader; data.loader='ray_data' decodes on CPU nodes: use one of them (data.loader=torch with data.decode=gpu)")
    if d.name == "digits":
        return DataInfo(DataShape(10, 1, 8), DIGITS_TRAIN, DIGITS_VAL)
    if d.name == "fashion_mnist":
        sizes = _fashion_sizes(Path(d.root or FASHION_MNIST_DEFAULT))
        return DataInfo(DataShape(10, 1, 28), sizes["train_images"], sizes["val_images"])
    if d.loader == "ray_data" and d.name != "imagefolder":
        raise DataError(f"data.loader='ray_data' reads image folders; data.name={d.name!r} is an in-memory dataset: use data.loader=torch")
    if d.name == "imagefolder":
        if not d.root:
            raise DataError("data.name='imagefolder' needs data.root (a directory with train/ and val/, or shards from `mjp data prepare`)")
        from trainables.shards import shard_metadata

        meta = shard_metadata(d.root)
        if meta is not None:
            if d.loader != "ray_data":
                raise DataError(f"data.root={d.root!r} holds Parquet shards (mjp data prepare), which only data.loader=ray_data reads; set it, or point data.root at the image folder")
            if len(meta["classes"]) < 2:
                raise DataError(f"data.root={d.root!r} holds shards of {len(meta['classes'])} class; a classifier needs at least 2 classes")
            return DataInfo(DataShape(len(meta["classes"]), 3, d.img_size or 224), meta["train_size"], meta["val_size"])
        if not (Path(d.root) / "train").is_dir():
            from trainables.folder_manifest import read_manifest

            manifest = read_manifest(d.root)  # the images are on other nodes (cluster.yaml's head)
            if manifest is not None:
                return DataInfo(DataShape(len(manifest.classes), 3, d.img_size or 224), manifest.train_images, manifest.val_images)
        scan = scan_imagefolder(Path(d.root))
        if scan.empty_files and d.on_bad_image == "fail":
            shown = ", ".join(scan.empty_files[:3]) + (f" and {len(scan.empty_files) - 3} more" if len(scan.empty_files) > 3 else "")
            raise DataError(f"{len(scan.empty_files)} zero-byte image(s) in {d.root}: {shown}; remove them, or set data.on_bad_image=skip (`mjp data check {d.root}` lists every bad file)")
        return DataInfo(DataShape(len(scan.classes["train"]), 3, d.img_size or 224), scan.counts["train"], scan.counts["val"])
    if not d.root:
        raise DataError(f"data.name={d.name!r} needs data.root (where torchvision keeps it)")
    marker = "cifar-10-batches-py" if d.name == "cifar10" else "cifar-100-python"
    if not d.download and not (Path(d.root) / marker).is_dir():
        raise DataError(f"{d.name} not found in {d.root}/{marker}; set data.download=true to fetch it (needs internet)")
    return DataInfo(DataShape(10 if d.name == "cifar10" else 100, 3, d.img_size or 32), 50_000, 10_000)


def _limit(ds: Dataset, n: int | None) -> Dataset:
    return ds if n is None or n >= len(ds) else Subset(ds, range(n))


def load_datasets(cfg: TrainConfig) -> DatasetBundle:
    """Train and val datasets for ``cfg.data`` (after ``check_data``)."""
    build = {"digits": _digits, "fashion_mnist": _fashion_mnist, "imagefolder": _imagefolder, "cifar10": _cifar, "cifar100": _cifar}
    bundle = build[cfg.data.name](cfg.data)
    return DatasetBundle(_limit(bundle.train, cfg.data.train_limit), _limit(bundle.val, cfg.data.val_limit), bundle.shape, bundle.skipped_log, bundle.pixels)


def fixed_images(dataset: Dataset, n: int | None) -> tuple[torch.Tensor, torch.Tensor]:
    """The first ``n`` items of ``dataset`` (all when None): ``[n, C, H, W]``, ``[n]``; the same set every run."""
    count = len(dataset) if n is None else min(n, len(dataset))
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
        import sklearn

        source = str(Path(sklearn.__file__).parent / "datasets" / "data" / "digits.csv.gz")
    elif d.name == "fashion_mnist":
        source = str(Path(d.root or FASHION_MNIST_DEFAULT).resolve())
    else:
        source = str(Path(d.root).resolve()) if d.root else d.name
    out = []
    for split, ds, context in (("train", bundle.train, "training"), ("val", bundle.val, "evaluation")):
        size = len(ds) if d.loader == "torch" or split == "val" else data_info(cfg).train_size
        limit = d.train_limit if split == "train" else d.val_limit
        digest = hashlib.sha256(f"{d.name}|{source}|{split}|{size}|{limit}|{d.seed if split == 'train' else ''}".encode()).hexdigest()[:16]
        profile = {"split": split, "num_images": size, "image_size": f"{bundle.shape.img_size}x{bundle.shape.img_size}x{bundle.shape.in_chans}", "num_classes": bundle.shape.num_classes}
        out.append(DatasetInput(f"{d.name}-{split}", digest, source, profile, context))
    return out
