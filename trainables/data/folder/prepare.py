"""``mjp data prepare ROOT OUT``: pack an ImageNet-style training folder into Parquet shards.

1.28M small files are slow to list and to open on network and object storage; a thousand files
of a thousand encoded images each are not. Each shard holds the images' encoded bytes as they
were (no re-encoding), their label and their original path; ``OUT/mjp_shards.json`` records the
classes, counts and where the validation images stay (they are read as files, exactly once per
evaluation, by the torch DataLoader). Zero-byte files are left out and counted.
"""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from trainables.data.folder.image_folder import IMAGE_EXTENSIONS, scan_imagefolder
from trainables.data.folder.shards import SHARD_MARKER
from trainables.errors import DataError
from trainables.written import atomic_file, write_atomically


def _files(split_dir: Path, classes: list[str]) -> list[tuple[str, int]]:
    out = []
    for label, name in enumerate(classes):
        with os.scandir(split_dir / name) as entries:
            out += sorted(
                (e.path, label) for e in entries if e.is_file() and e.name.lower().endswith(IMAGE_EXTENSIONS) and e.stat().st_size > 0
            )
    return out


def _write_shard(path: Path, items: list[tuple[str, int]]) -> int:
    table = pa.table(
        {
            "image": pa.array([Path(p).read_bytes() for p, _ in items], type=pa.binary()),
            "label": pa.array([label for _, label in items], type=pa.int64()),
            "path": pa.array([p for p, _ in items], type=pa.string()),
        }
    )
    with atomic_file(path, binary=True) as out:
        pq.write_table(table, out)
    return len(items)


def prepare_shards(root: str | Path, out: str | Path, *, images_per_shard: int = 1000, workers: int | None = None) -> str:
    """Write ``OUT/train/part-*.parquet`` and ``OUT/mjp_shards.json``; returns a summary line."""
    root, out = Path(root).resolve(), Path(out)
    if images_per_shard < 1:
        raise DataError(f"--images-per-shard {images_per_shard}: allowed is 1 or more")
    scan = scan_imagefolder(root)
    if out.exists() and any(out.iterdir()):
        raise DataError(f"{out} is not empty; give a new folder for the shards")
    classes = scan.classes["train"]
    files = _files(root / "train", classes)
    (out / "train").mkdir(parents=True, exist_ok=True)
    chunks = [files[i : i + images_per_shard] for i in range(0, len(files), images_per_shard)]
    with ThreadPoolExecutor(max_workers=workers or min(16, (os.cpu_count() or 1) * 4)) as pool:  # reading files: I/O bound
        written = sum(pool.map(lambda ic: _write_shard(out / "train" / f"part-{ic[0]:05d}.parquet", ic[1]), enumerate(chunks)))
    write_atomically(
        out / SHARD_MARKER,
        json.dumps(
            {
                "source": str(root),
                "classes": classes,
                "train_size": written,
                "val_root": str(root / "val"),
                "val_size": scan.counts["val"],
                "shards": len(chunks),
                "skipped_empty": len(scan.empty_files),
            },
            indent=2,
        ),
    )
    empty = len(scan.empty_files)
    skipped = f"; {empty} zero-byte file{'s' * (empty != 1)} left out" if empty else ""
    return (
        f"{written} training images of {len(classes)} classes in {len(chunks)} Parquet shard{'s' * (len(chunks) != 1)} under "
        f"{out / 'train'}{skipped}; "
        f"validation stays in {root / 'val'}"
    )
