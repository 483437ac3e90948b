"""An image folder's manifest, ``mjp_folder.json``: its classes and image counts, for a node that
does not hold the images.

On ``cluster.yaml`` the images live on the GPU nodes (``/data/imagenet``, copied from S3 as each
joins), while a sweep's driver runs on the head. Its pre-flight needs the folder's classes and
split sizes (the model's head, batch and epoch checks) and would otherwise look for 1.28 M files
that are not there. ``mjp data check ROOT --manifest`` writes the manifest beside ``train/`` and
``val/`` once every image has been read successfully; the head copies only this file. Where
``train/`` is present the folder itself is scanned and the manifest is not read. Plain JSON:
reading it runs no code.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from trainables.errors import DataError
from trainables.written import write_atomically

MANIFEST_FILE = "mjp_folder.json"


@dataclass(frozen=True)
class FolderManifest:
    """What the pre-flight needs of a folder whose images are elsewhere."""

    classes: list[str]
    train_images: int
    val_images: int


def check_splits(root: str | Path) -> None:
    """``DataError`` unless ``root`` has the ``train/`` and ``val/`` a manifest describes."""
    root = Path(root)
    if not ((root / "train").is_dir() and (root / "val").is_dir()):
        raise DataError(
            f"a manifest describes a folder with train/ and val/ ({root}/{{train,val}}/<class>/*); {root} has no train/ or no val/"
        )


def write_manifest(root: str | Path) -> Path:
    """Scan ``root/{train,val}/<class>/*`` (the pre-flight's own scan) and write its manifest."""
    from trainables.data.folder.image_folder import scan_imagefolder

    root = Path(root)
    check_splits(root)
    scan = scan_imagefolder(root)
    path = root / MANIFEST_FILE
    manifest = {"classes": scan.classes["train"], "train_images": scan.counts["train"], "val_images": scan.counts["val"]}
    try:
        write_atomically(path, json.dumps(manifest, indent=1) + "\n")
    except OSError as err:
        raise DataError(
            f"cannot write the manifest {path} ({type(err).__name__}: {err.strerror or err}); write access to {root} is needed, or run the "
            "check where it has it"
        ) from None
    return path


def read_manifest(root: str | Path) -> FolderManifest | None:
    """The manifest in ``root``, or None when there is none; ``DataError`` for one that is not ours."""
    path = Path(root) / MANIFEST_FILE
    if not path.is_file():
        return None
    try:
        tree = json.loads(path.read_text())
        manifest = FolderManifest([str(c) for c in tree["classes"]], int(tree["train_images"]), int(tree["val_images"]))
    except (ValueError, KeyError, TypeError, OSError) as err:
        raise DataError(
            f"{path} is not a folder manifest ({type(err).__name__}: {err}); write it again with `mjp data check {root} --manifest`"
        ) from None
    if len(manifest.classes) < 2 or manifest.train_images < 1 or manifest.val_images < 1:
        raise DataError(
            f"{path}: {len(manifest.classes)} classes, {manifest.train_images} train and {manifest.val_images} val images; write it again "
            f"with `mjp data check {root} --manifest`"
        )
    return manifest
