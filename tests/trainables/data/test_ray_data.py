"""The Ray Data input path: decode + DeiT transforms as Ray Data tasks, streamed to the training
(in the trial's process, or split across a TorchTrainer's workers), from image files or shards."""

import io
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from PIL import Image

from trainables.config.build import build_config
from trainables.data.folder.prepare import prepare_shards
from trainables.data.folder.shards import shard_metadata
from trainables.data.ray_data import decode_and_augment

CLASSES = ("cat", "dog")


def folder(root, per_class=24, size=20):
    rng = np.random.default_rng(0)
    for split in ("train", "val"):
        for c in CLASSES:
            (root / split / c).mkdir(parents=True)
            for i in range(per_class if split == "train" else 4):
                Image.fromarray(rng.integers(0, 255, (size, size, 3), dtype=np.uint8)).save(root / split / c / f"{i}.jpg")
    return root


def config(tmp_path, root, **over):
    tree = {
        "model": {"kwargs": {"patch_size": 4, "embed_dim": 32, "depth": 1, "num_heads": 2}},
        "data": {"name": "imagefolder", "root": str(root), "img_size": 16, "batch_size": 8, "loader": "ray_data", "augment": "deit"},
        "optim": {"epochs": 2},
        "eval": {"shuffle_ratios": [0.0, 0.5]},
    }
    return build_config(tree, {"tracking.uri": f"sqlite:///{tmp_path}/mlflow.db", "tracking.storage_path": str(tmp_path / "runs"), **over})


def test_decode_and_augment_gives_the_dataloader_s_tensors(tmp_path):
    cfg = config(tmp_path, folder(tmp_path / "img"))
    paths = sorted(str(p) for p in (tmp_path / "img" / "train").rglob("*.jpg"))[:5] + [str(tmp_path / "img" / "train" / "dog" / "0.jpg")]
    batch = {"bytes": np.array([Path(p).read_bytes() for p in paths], dtype=object), "path": np.array(paths)}
    out = decode_and_augment(batch, cfg.data, {c: i for i, c in enumerate(CLASSES)})
    assert out["image"].shape == (6, 3, 16, 16) and out["image"].dtype == np.float32
    assert out["label"].tolist() == [0, 0, 0, 0, 0, 1]


def test_a_broken_image_is_named_or_skipped(tmp_path):
    cfg = config(tmp_path, folder(tmp_path / "img"))
    batch = {"bytes": np.array([b"not an image"], dtype=object), "path": np.array(["/x/cat/bad.jpg"])}
    from trainables.data.folder.image_folder import UnreadableImage

    with pytest.raises(UnreadableImage, match="cannot read image /x/cat/bad.jpg"):
        decode_and_augment(batch, cfg.data, {"cat": 0})
    skipped = decode_and_augment(batch, cfg.data.model_copy(update={"on_bad_image": "skip"}), {"cat": 0})
    assert skipped["image"].shape == (0, 3, 16, 16)


def test_prepared_shards_hold_the_encoded_bytes_and_labels(tmp_path):
    root = folder(tmp_path / "img")
    summary = prepare_shards(root, tmp_path / "shards", images_per_shard=20)
    assert "48 training images of 2 classes in 3 Parquet shards" in summary
    meta = shard_metadata(tmp_path / "shards")
    assert meta["classes"] == list(CLASSES) and meta["train_size"] == 48 and meta["val_root"] == str(root / "val")
    table = pq.read_table(tmp_path / "shards" / "train" / "part-00000.parquet").to_pydict()
    assert table["image"][0] == Path(table["path"][0]).read_bytes() and set(table["label"]) == {0}
    Image.open(io.BytesIO(table["image"][0])).verify()
    one = prepare_shards(root, tmp_path / "one", images_per_shard=100)
    assert "in 1 Parquet shard under" in one  # it said "1 Parquet shards"


@pytest.mark.slow
def test_training_reads_the_train_split_through_ray_data(tmp_path, local_ray):
    """In the trial's own process; the TorchTrainer path (2 workers, shards) is in test_ray_train."""
    from sweep.tuner.training import run_training

    outcome = run_training(config(tmp_path, folder(tmp_path / "img")), stream=io.StringIO())
    assert outcome.error is None and outcome.metrics["epoch"] == 2
    assert 0 <= outcome.metrics["val/top1"] <= 1
