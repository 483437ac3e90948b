"""The training split through Ray Data (``data.loader: ray_data``): decoding and the DeiT
augmentations run as Ray Data tasks on any CPU node of the cluster (the CPU-only worker nodes of
``cluster.yaml`` included), and the augmented batches stream to the training workers.

A GPU step of DeiT-S consumes more images per second than a node's own cores can decode and
augment (BENCHMARKS.md, bench_data); the torch ``DataLoader`` can only use the cores of the GPU's
node, Ray Data can use every core of the cluster. Source: the image folder itself (encoded bytes
read as files) or the Parquet shards ``mjp data prepare`` wrote. The transforms are timm's, built
from the same config as the DataLoader path's, so both paths augment alike. Order: a folder's
files are shuffled afresh each epoch (seeded with ``data.seed``), so every batch is a random set
of files as with the DataLoader's sampler; Parquet shards (rows in class order) are read in a
shuffled file order and reordered by a local shuffle buffer seeded with ``data.seed`` and the
epoch. Validation stays on the exact, per-rank torch DataLoader.
"""

from __future__ import annotations

import functools
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from mjp.config import SEED_BOUND
from trainables.config.schema import DataSection, TrainConfig
from trainables.data.folder.image_folder import IMAGE_EXTENSIONS, UnreadableImage, to_rgb
from trainables.data.folder.shards import shard_metadata
from trainables.data.info import imagefolder_root

#: images each decode-and-augment task of a Parquet source handles at once (a folder's read
#: tasks decode ``data.batch_size`` files each, see ``train_dataset``)
DECODE_BATCH = 64
#: rows of the per-worker shuffle buffer (about a few batches); Parquet shards only, whose rows
#: sit in class order (a folder's files are shuffled afresh each epoch, which is enough)
SHUFFLE_BUFFER = 2048


@functools.lru_cache(maxsize=4)
def _transform(data: DataSection) -> Any:
    from trainables.data.transforms import image_transforms

    return image_transforms(data, data.img_size or 224, True)


def _label_of(path: str, classes: dict[str, int] | None) -> int:
    """The class of an image read from a folder: its parent folder's index in ``classes``."""
    if classes is None:
        raise ValueError(f"{path}: a batch without labels needs the folder's class indices")
    return classes[Path(path).parent.name]


def decode_and_augment(batch: dict[str, Any], data: DataSection, classes: dict[str, int] | None) -> dict[str, np.ndarray]:
    """A Ray Data batch of encoded images -> ``{"image": float32 [B, 3, H, W], "label": int64 [B]}``."""
    from PIL import Image

    transform = _transform(data)
    images, labels = [], []
    paths = batch.get("path")
    for i, raw in enumerate(batch["bytes"] if "bytes" in batch else batch["image"]):
        path = str(paths[i]) if paths is not None else f"row {i}"
        try:
            picture = to_rgb(Image.open(io.BytesIO(raw)), path)
        except UnreadableImage:
            if data.on_bad_image == "skip":
                continue
            raise
        except Exception as err:  # PIL raises many kinds; every one means this file is unusable
            if data.on_bad_image == "skip":
                continue
            raise UnreadableImage(path, err) from err
        images.append(transform(picture).numpy())
        labels.append(int(batch["label"][i]) if "label" in batch else _label_of(path, classes))
    size = data.img_size or 224
    empty = np.zeros((0, 3, size, size), np.float32)
    return {"image": np.stack(images) if images else empty, "label": np.asarray(labels, dtype=np.int64)}


def _folder_files(train_dir: Path, limit: int | None) -> tuple[list[str], dict[str, int]]:
    """The image files of ``train_dir/<class>/`` in the torch loader's order (classes, then names),
    the first ``limit`` of them, and the class indices."""
    from torchvision.datasets.folder import make_dataset

    names = sorted(p.name for p in train_dir.iterdir() if p.is_dir())
    classes = {name: i for i, name in enumerate(names)}
    files = [path for path, _ in make_dataset(str(train_dir), classes, extensions=IMAGE_EXTENSIONS)]
    return files[:limit] if limit is not None else files, classes


def train_dataset(cfg: TrainConfig) -> Any:
    """The training split as a Ray Data dataset of augmented images (re-augmented every epoch).

    From a folder, the file list is shuffled afresh each epoch (seeded by ``data.seed``) and cut
    into read tasks of about ``data.batch_size`` files; each task reads and decodes its own files
    (Ray fuses the read and the ``map_batches``: no stage that only moves bytes through the
    object store) and its block is one training batch, so the consumer does not re-slice blocks
    into batches. Measured in ``benchmarks/bench_data.py`` (BENCHMARKS.md).
    """
    import ray.data

    data = cfg.data
    place = _placement(data)
    root = imagefolder_root(data)
    if shard_metadata(root) is not None:
        ds = ray.data.read_parquet(str(root / "train"), columns=["image", "label", "path"], ray_remote_args=place)
        if data.train_limit is not None:
            ds = ds.limit(data.train_limit)
        return ds.map_batches(
            decode_and_augment,  # type: ignore[arg-type]  # Ray's stubs take fn(batch) only; fn_kwargs supplies the rest
            fn_kwargs={"data": data, "classes": None},
            batch_size=DECODE_BATCH,
            batch_format="numpy",
            **place,
        )
    files, classes = _folder_files(root / "train", data.train_limit)
    ds = ray.data.read_binary_files(
        files if data.train_limit is not None else str(root / "train"),
        include_paths=True,
        file_extensions=[e.lstrip(".") for e in IMAGE_EXTENSIONS],
        shuffle=ray.data.FileShuffleConfig(seed=data.seed),
        override_num_blocks=max(1, len(files) // data.batch_size),
        ray_remote_args=place,
    )
    return ds.map_batches(
        decode_and_augment,  # type: ignore[arg-type]  # Ray's stubs take fn(batch) only; fn_kwargs supplies the rest
        fn_kwargs={"data": data, "classes": classes},
        batch_size=None,
        batch_format="numpy",
        **place,
    )


def _placement(data: Any) -> dict[str, Any]:
    """Ray remote args of the read and decode tasks: ``data.ray_data_resources`` when set (the same
    on both, so Ray still fuses them into one task)."""
    return {"resources": dict(data.ray_data_resources)} if data.ray_data_resources else {}


def shuffle_buffer_rows(cfg: TrainConfig) -> int | None:
    """Rows of the consumer's local shuffle buffer: Parquet shards need one, a folder does not."""
    root = cfg.data.root
    return SHUFFLE_BUFFER if root is not None and shard_metadata(root) is not None else None


class RayDataLoader:
    """An epoch of ``(images, labels)`` torch batches from a Ray Data iterator: the DataLoader's
    interface for the engine (``len`` = full batches per epoch on this worker)."""

    def __init__(self, iterator: Any, batch_size: int, steps: int, seed: int, device: Any, shuffle_buffer: int | None = SHUFFLE_BUFFER):
        self.iterator, self.batch_size, self.steps, self.seed, self.device = iterator, batch_size, steps, seed, device
        self.shuffle_buffer = shuffle_buffer
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return self.steps

    def __iter__(self) -> Iterator[tuple[Any, Any]]:
        batches = self.iterator.iter_torch_batches(
            batch_size=self.batch_size,
            drop_last=True,
            device=self.device,
            local_shuffle_buffer_size=self.shuffle_buffer,
            local_shuffle_seed=(self.seed + self.epoch) % SEED_BOUND if self.shuffle_buffer else None,
        )
        for step, batch in enumerate(batches):
            if step == self.steps:
                break
            yield batch["image"], batch["label"]
