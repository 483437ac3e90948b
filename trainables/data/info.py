"""What a dataset holds without loading it: its image shape, classes and sizes (``DataShape``,
``DataInfo``), and the checks that it is there and readable before a run starts."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from trainables.config.schema import DataSection, TrainConfig
from trainables.data.folder.image_folder import scan_imagefolder
from trainables.data.idx import FASHION_MNIST_DEFAULT, fashion_sizes
from trainables.errors import DataError

#: scikit-learn's digits (1,797 images) split 80/20, stratified, fixed
DIGITS_TRAIN, DIGITS_VAL = 1437, 360


IMAGEFOLDER_NEEDS_ROOT = "data.name='imagefolder' needs data.root (a directory with train/ and val/, or shards from `mjp data prepare`)"


def imagefolder_root(d: DataSection) -> Path:
    """``data.root`` of an imagefolder (``check_data`` refuses a config without one)."""
    if d.root is None:
        raise DataError(IMAGEFOLDER_NEEDS_ROOT)
    return Path(d.root)


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


def check_data(cfg: TrainConfig) -> None:
    """Fail early, before Ray starts, when the configured data is missing or broken."""
    data_info(cfg)


#: the published figures of the datasets whose files may be absent where a sweep is planned (the
#: cluster's nodes hold them): classes, channels, image side, training and validation images, whose
PUBLISHED = {
    "imagefolder": (1000, 3, 224, 1_281_167, 50_000, "ImageNet-1K's"),
    "fashion_mnist": (10, 1, 28, 60_000, 10_000, "Fashion-MNIST's"),
    "cifar10": (10, 3, 32, 50_000, 10_000, "CIFAR-10's"),
    "cifar100": (100, 3, 32, 50_000, 10_000, "CIFAR-100's"),
}


def check_data_settings(cfg: TrainConfig) -> None:
    """The ``data`` settings that contradict each other, whatever the files hold (``DataError``)."""
    d = cfg.data
    if d.root is not None and d.name == "digits":
        raise DataError(
            f"data.root={d.root!r} is given, but data.name='digits' is bundled with scikit-learn and reads no directory; drop data.root or "
            "pick fashion_mnist / imagefolder / cifar10"
        )
    if d.decode == "gpu" and d.name != "imagefolder":
        raise DataError(
            f"data.decode='gpu' decodes image files on the training device; data.name={d.name!r} is decoded in memory already: use "
            "data.decode=cpu (gpu needs data.name=imagefolder)"
        )
    if d.decode == "gpu" and d.loader == "ray_data":
        raise DataError(
            "data.decode='gpu' ships encoded images through the torch loader; data.loader='ray_data' decodes on CPU nodes: use one of "
            "them (data.loader=torch with data.decode=gpu)"
        )
    if d.loader == "ray_data" and d.name not in ("imagefolder", "digits"):
        raise DataError(f"data.loader='ray_data' reads image folders; data.name={d.name!r} is an in-memory dataset: use data.loader=torch")


def planned_data_info(cfg: TrainConfig) -> tuple[DataInfo, str | None]:
    """``data_info``, or, where the files cannot be read here (a plan made away from the cluster
    that holds them), the dataset's published figures and a note saying so. Contradicting
    settings are refused either way, so a plan accepts no config a run would refuse for them."""
    check_data_settings(cfg)
    try:
        return data_info(cfg), None
    except DataError:
        if cfg.data.name not in PUBLISHED or _readable_here(cfg):
            raise  # files that are here and broken are refused, as a run refuses them
    classes, chans, side, train, val, whose = PUBLISHED[cfg.data.name]
    return DataInfo(DataShape(classes, chans, cfg.data.img_size or side), train, val), f"{whose} {train:,} (data.root is not readable here)"


def _readable_here(cfg: TrainConfig) -> bool:
    """Whether the configured data's directory exists and can be listed on this machine."""
    root = cfg.data.root or (FASHION_MNIST_DEFAULT if cfg.data.name == "fashion_mnist" else None)
    if root is None or "://" in str(root):
        return False
    try:
        next(iter(os.scandir(root)), None)
    except OSError:
        return False
    return True


def data_info(cfg: TrainConfig) -> DataInfo:
    """Shape and split sizes of the configured data, without loading it; ``DataError`` when the
    data is missing or broken (unreadable headers, zero-byte images, a layout that does not fit)."""
    d = cfg.data
    check_data_settings(cfg)
    if d.name == "digits":
        return DataInfo(DataShape(10, 1, 8), DIGITS_TRAIN, DIGITS_VAL)
    if d.name == "fashion_mnist":
        sizes = fashion_sizes(Path(d.root or FASHION_MNIST_DEFAULT))
        return DataInfo(DataShape(10, 1, 28), sizes["train_images"], sizes["val_images"])
    if d.name == "imagefolder":
        if not d.root:
            raise DataError(IMAGEFOLDER_NEEDS_ROOT)
        from trainables.data.folder.shards import shard_metadata

        meta = shard_metadata(d.root)
        if meta is not None:
            if d.loader != "ray_data":
                raise DataError(
                    f"data.root={d.root!r} holds Parquet shards (mjp data prepare), which only data.loader=ray_data reads; set it, or "
                    "point data.root at the image folder"
                )
            if len(meta["classes"]) < 2:
                raise DataError(f"data.root={d.root!r} holds shards of {len(meta['classes'])} class; a classifier needs at least 2 classes")
            return DataInfo(DataShape(len(meta["classes"]), 3, d.img_size or 224), meta["train_size"], meta["val_size"])
        if not (Path(d.root) / "train").is_dir():
            from trainables.data.folder.manifest import read_manifest

            manifest = read_manifest(d.root)  # the images are on other nodes (cluster.yaml's head)
            if manifest is not None:
                return DataInfo(DataShape(len(manifest.classes), 3, d.img_size or 224), manifest.train_images, manifest.val_images)
        scan = scan_imagefolder(Path(d.root))
        if scan.empty_files and d.on_bad_image == "fail":
            shown = ", ".join(scan.empty_files[:3]) + (f" and {len(scan.empty_files) - 3} more" if len(scan.empty_files) > 3 else "")
            raise DataError(
                f"{len(scan.empty_files)} zero-byte image(s) in {d.root}: {shown}; remove them, or set data.on_bad_image=skip (`mjp data "
                f"check {d.root}` lists every bad file)"
            )
        return DataInfo(DataShape(len(scan.classes["train"]), 3, d.img_size or 224), scan.counts["train"], scan.counts["val"])
    if not d.root:
        raise DataError(f"data.name={d.name!r} needs data.root (where torchvision keeps it)")
    marker = "cifar-10-batches-py" if d.name == "cifar10" else "cifar-100-python"
    if not d.download and not (Path(d.root) / marker).is_dir():
        raise DataError(f"{d.name} not found in {d.root}/{marker}; set data.download=true to fetch it (needs internet)")
    return DataInfo(DataShape(10 if d.name == "cifar10" else 100, 3, d.img_size or 32), 50_000, 10_000)
