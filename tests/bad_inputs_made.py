"""The bad inputs of ``tests/test_bad_inputs.py``, made on disk: files, folders, stores and
checkpoints that are broken the way a careless or hostile user's are."""

from __future__ import annotations

import gzip
import os
import struct
from pathlib import Path

import numpy as np
import torch
import yaml
from PIL import Image

CONFIG = "trainables/configs/digits_vit_tiny.yaml"


def write(path: Path, text: str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return str(path)


def study(tmp: Path, **fields) -> str:
    body = {"name": "s", "base": CONFIG, "objective": {"metric": "val/top1"}, "budget": {"trials": 1}, **fields}
    return write(tmp / "study.yaml", yaml.safe_dump(body))


def idx(path: Path, array: np.ndarray, magic: int = 0x08, truncate: int = 0) -> None:
    header = struct.pack(">BBBB", 0, 0, magic, array.ndim) + b"".join(struct.pack(">I", d) for d in array.shape)
    body = array.astype(np.uint8).tobytes()
    with gzip.open(path, "wb") as fh:
        fh.write(header + body[: len(body) - truncate])


def fashion(tmp: Path, **broken) -> str:
    root = tmp / "fashion"
    root.mkdir()
    for split in ("train", "t10k"):
        idx(root / f"{split}-images-idx3-ubyte.gz", np.zeros((256, 28, 28)), **(broken if split == "train" else {}))
        idx(root / f"{split}-labels-idx1-ubyte.gz", np.arange(256) % 10)
    return str(root)


def imagefolder(tmp: Path, empty_file: bool = False, classes: tuple[str, ...] = ("cat", "dog")) -> str:
    root = tmp / "images"
    for split in ("train", "val"):
        for c in classes:
            (root / split / c).mkdir(parents=True)
            Image.fromarray(np.zeros((16, 16, 3), np.uint8)).save(root / split / c / "0.png")
    if empty_file:
        (root / "train" / "cat" / "1.png").write_bytes(b"")
    return str(root)


def folders_without_images(tmp: Path) -> str:
    root = tmp / "no-images"
    for split in ("train", "val"):
        for c in ("cat", "dog"):
            (root / split / c).mkdir(parents=True)
    return str(root)


class Evil:
    """Unpickling this would create a directory: proof that code ran."""

    def __init__(self, target: str):
        self.target = target

    def __reduce__(self):
        return (os.makedirs, (self.target,))


def evil_checkpoint(tmp: Path) -> str:
    path = tmp / "evil.pt"
    torch.save({"model": Evil(str(tmp / "pwned"))}, path)
    return str(path)


def mlflow_store(tmp: Path) -> str:
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp}/mlflow.db"
    MlflowClient(uri).search_experiments()  # creates the schema
    return uri


def laughs(levels: int) -> str:
    """Nested YAML aliases: ``a`` holds 10 values, each next key 10 aliases of the one before."""
    text = "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
    for i in range(1, levels):
        text += f"{chr(97 + i)}: &{chr(97 + i)} [" + ", ".join([f"*{chr(96 + i)}"] * 10) + "]\n"
    return text


def damaged_store(tmp: Path) -> str:
    """A store with runs in it and 8 KiB of garbage over its middle pages (a torn copy, a bad disk)."""
    from mlflow.entities import Metric, Param
    from mlflow.tracking import MlflowClient

    uri = mlflow_store(tmp)
    client = MlflowClient(uri)
    experiment = client.create_experiment("x")
    for _ in range(20):
        run = client.create_run(experiment)
        client.log_batch(
            run.info.run_id, params=[Param(f"p{j}", "v" * 50) for j in range(50)], metrics=[Metric("m", j, 0, j) for j in range(50)]
        )
    path = tmp / "mlflow.db"
    data = bytearray(path.read_bytes())
    middle = len(data) // 2 // 4096 * 4096
    data[middle : middle + 8192] = np.random.default_rng(0).integers(0, 256, 8192, dtype=np.uint8).tobytes()
    path.write_bytes(bytes(data))
    return uri


def empty_store(tmp: Path) -> str:
    (tmp / "mlflow.db").write_bytes(b"")
    return f"sqlite:///{tmp}/mlflow.db"


def whole_model(tmp: Path) -> str:
    """A whole module saved with torch.save (not a state dict): loading it means unpickling classes."""
    from mjp import create_model

    path = tmp / "whole.pt"
    torch.save(create_model("vit_tiny_patch16_224", num_classes=10, img_size=8, patch_size=2, embed_dim=32, depth=1, num_heads=2), path)
    return str(path)


def weights(tmp: Path) -> Path:
    from mjp import create_model

    path = tmp / "other.pt"
    torch.save(
        create_model("vit_tiny_patch16_224", num_classes=3, img_size=32, patch_size=4, embed_dim=32, depth=1, num_heads=2).state_dict(),
        path,
    )
    return path
