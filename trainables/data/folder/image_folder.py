"""Reading an ImageNet-style folder (``<root>/{train,val}/<class>/<image>``): which files are
images, a listing that checks the layout without opening an image, and decoding that names the
file it cannot read (or, with ``data.on_bad_image: skip``, skips it and keeps its path)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from torch.utils.data import Dataset

from trainables.errors import DataError

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")


class UnreadableImage(DataError):
    """An image file that cannot be decoded; ``path`` names it."""

    def __init__(self, path: str, reason: object):
        super().__init__(f"cannot read image {path}: {reason}; remove it, or set data.on_bad_image=skip")
        self.path = path


#: Pillow's modes of 16-bit grey images (a 16-bit PNG opens as one of these)
SIXTEEN_BIT_MODES = ("I;16", "I;16L", "I;16B", "I;16N")


def to_rgb(img: Any, path: str) -> Any:
    """An 8-bit RGB image. Pillow's own ``convert("RGB")`` clips 16-bit grey to 255 (a 16-bit
    PNG turns white), so 16-bit values are scaled to 0..255 first; 32-bit integer and float
    images, whose range is unknown, are refused with ``UnreadableImage``."""
    import numpy as np
    from PIL import Image

    if img.mode in SIXTEEN_BIT_MODES or (img.mode == "I" and img.format == "PNG"):
        values = np.asarray(img, dtype=np.uint32)
        img = Image.fromarray(((values + 128) // 257).clip(0, 255).astype(np.uint8), "L")
    elif img.mode in ("I", "F"):
        raise UnreadableImage(
            path,
            f"{'32-bit integer' if img.mode == 'I' else 'floating-point'} pixels (mode {img.mode}) have no known range; "
            "allowed: 8-bit images (L, RGB, RGBA, P) or 16-bit grey PNG",
        )
    return img.convert("RGB")


def readable_loader(path: str):
    """An RGB PIL image from ``path``; ``UnreadableImage`` naming the file when it cannot be decoded."""
    from PIL import Image

    try:
        with open(path, "rb") as fh:
            return to_rgb(Image.open(fh), path)
    except UnreadableImage:
        raise
    except Exception as err:  # PIL raises many kinds; every one means this file is unusable
        raise UnreadableImage(path, err) from err


class MapDataset(Protocol):
    """A map-style dataset: items by index and a length (which torch's ``Dataset`` type leaves out)."""

    def __len__(self) -> int: ...

    def __getitem__(self, index: int) -> Any: ...


class SkippingImages(Dataset):
    """``data.on_bad_image: skip``: an unreadable image is replaced by the next readable one, and
    its path appended to ``log_file`` (shared by the DataLoader's worker processes)."""

    def __init__(self, inner: MapDataset, log_file: Path):
        self.inner, self.log_file = inner, log_file
        self.samples, self.classes = getattr(inner, "samples", None), getattr(inner, "classes", None)

    def __len__(self) -> int:
        return len(self.inner)

    def __getitem__(self, i: int):
        for k in range(len(self.inner)):
            try:
                return self.inner[(i + k) % len(self.inner)]
            except UnreadableImage as err:
                with open(self.log_file, "a") as fh:
                    fh.write(err.path + "\n")
        raise DataError(f"no readable image in {len(self.inner)} files")


def skipped_images(log_file: Path) -> list[str]:
    """The distinct paths ``SkippingImages`` skipped so far."""
    return sorted(set(log_file.read_text().splitlines())) if log_file.is_file() else []


@dataclass(frozen=True)
class FolderScan:
    """An ImageNet-style folder as seen by a listing (no image is opened)."""

    classes: dict[str, list[str]]  # split -> class names
    counts: dict[str, int]  # split -> image files
    empty_files: list[str]  # zero-byte image files


def absent_root(root: Path) -> str | None:
    """Why ``root`` is no folder to read (``does not exist``, ``is not a directory``), or None."""
    if root.is_dir():
        return None
    return "is not a directory" if root.exists() else "does not exist"


def scan_imagefolder(root: Path) -> FolderScan:
    """List ``root/{train,val}/<class>/*`` with file sizes; ``DataError`` for a broken layout."""
    classes: dict[str, list[str]] = {}
    counts: dict[str, int] = {}
    empty: list[str] = []
    why = absent_root(root)
    for split in ("train", "val"):
        d = root / split
        if why or not d.is_dir():
            raise DataError(
                f"data.root={str(root)!r}{' ' + why if why else f': missing {split}/'} (expected {root}/train/<class>/*.jpg and "
                f"{root}/val/<class>/*.jpg; where the images are on other nodes, as on cluster.yaml's head, "
                f"`mjp data check ROOT --manifest` writes the mjp_folder.json this node needs)"
            )
        folders = sorted(p for p in d.iterdir() if p.is_dir())
        if not folders:
            raise DataError(f"{d} has no class folders")
        per_class: dict[str, int] = {}
        for folder in folders:
            n = 0
            with os.scandir(folder) as entries:
                for entry in entries:
                    if entry.name.lower().endswith(IMAGE_EXTENSIONS) and entry.is_file():
                        n += 1
                        if entry.stat().st_size == 0:
                            empty.append(entry.path)
            per_class[folder.name] = n
        check_classes(root, {split: per_class}, complete=False)
        counts[split] = sum(per_class.values())
        classes[split] = [p.name for p in folders]
    check_classes(root, {split: dict.fromkeys(names, 1) for split, names in classes.items()})
    return FolderScan(classes, counts, sorted(empty))


def check_classes(root: Path, images: dict[str, dict[str, int]], *, complete: bool = True) -> None:
    """What training refuses in a folder's listing (``images``: split -> class -> image files;
    the split ``(root)`` for ``ROOT/<class>/*``), shared with ``mjp data check``: class folders
    without images; where ``complete`` (every split listed), train and val with different classes
    and fewer than 2 classes."""
    for split, per_class in images.items():
        without = [c for c, n in per_class.items() if n == 0]
        if without:
            where = root if split == "(root)" else root / split
            raise DataError(f"{where}: class folders without images: {', '.join(without[:10])}")
    if not complete:
        return
    classes = {split: sorted(per_class) for split, per_class in images.items()}
    if "train" in classes and "val" in classes and classes["train"] != classes["val"]:
        only_train = sorted(set(classes["train"]) - set(classes["val"]))
        only_val = sorted(set(classes["val"]) - set(classes["train"]))
        raise DataError(f"{root}: train and val classes differ (only in train: {only_train[:10]}, only in val: {only_val[:10]})")
    names = next(iter(classes.values()), [])
    if len(names) < 2:
        in_splits = "" if "(root)" in images else " in train/ and val/"
        raise DataError(
            f"data.root={str(root)!r} has {len(names)} class folder ({', '.join(names)}){in_splits}; a classifier needs at least 2 classes"
        )
