"""``data.decode: gpu`` on the CPU: encoded files through the loader, decode + DeiT augmentations on
the training device (here device="cpu", the same code that runs on CUDA): normalised batches, the
same for a seed whatever the loader workers and batches, refused where it cannot run, and one epoch
of training."""

import math

import pytest
import torch
from torch.utils.data import DataLoader, SequentialSampler

from tests.trainables.data.gpu.photos import CPU, jpeg_folder
from trainables.config.build import build_config
from trainables.data.datasets import load_datasets
from trainables.data.gpu.augment import DeviceRecipe
from trainables.data.gpu.decode import DeviceAugmentLoader, EncodedImages, SeededSampler, collate_encoded
from trainables.data.info import check_data
from trainables.errors import DataError


def loader_batches(root, workers, batch_size, epoch=0, seed=7):
    ds = EncodedImages(root / "train")
    sampler = SeededSampler(SequentialSampler(ds), seed)
    sampler.set_epoch(epoch)
    loader = DataLoader(ds, sampler=sampler, batch_size=batch_size, collate_fn=collate_encoded, num_workers=workers)
    recipe = DeviceRecipe(24, "deit", re_prob=1.0)  # erasing always on, so the test sees it
    return torch.cat([x for x, _ in DeviceAugmentLoader(loader, sampler, recipe, CPU, ds)])


def test_the_pipeline_gives_normalised_float_batches_deterministic_per_seed(tmp_path):
    root = jpeg_folder(tmp_path)
    a = loader_batches(root, workers=0, batch_size=4)
    assert a.shape == (12, 3, 24, 24) and a.dtype == torch.float32
    lo = (0 - 0.485) / 0.229
    hi = (1 - 0.406) / 0.225
    assert a.min() >= -5 and a.max() <= 5  # erased pixels are N(0, 1) noise
    assert ((a > lo - 1e-5) & (a < hi + 1e-5)).float().mean() > 0.9
    assert torch.equal(a, loader_batches(root, workers=0, batch_size=4))
    assert not torch.allclose(a, loader_batches(root, workers=0, batch_size=4, seed=8))
    assert not torch.allclose(a, loader_batches(root, workers=0, batch_size=4, epoch=1))


def test_the_result_depends_neither_on_loader_workers_nor_on_batches(tmp_path):
    root = jpeg_folder(tmp_path)
    a = loader_batches(root, workers=0, batch_size=4)
    assert torch.equal(a, loader_batches(root, workers=2, batch_size=4))
    assert torch.equal(a, loader_batches(root, workers=2, batch_size=3))
    assert torch.equal(a, loader_batches(root, workers=0, batch_size=12))


def test_repeats_of_an_index_get_their_own_seeds():
    sampler = SeededSampler([3, 3, 5], data_seed=1)
    (i, s0), (j, s1), (_, s2) = list(sampler)
    assert i == j == 3 and len({s0, s1, s2}) == 3


def test_decode_gpu_is_refused_for_in_memory_data_and_ray_data(tmp_path):
    with pytest.raises(DataError, match="data.decode='gpu'.*data.name='digits'"):
        check_data(build_config({"data": {"decode": "gpu"}}))
    jpeg_folder(tmp_path)
    with pytest.raises(DataError, match="data.loader='ray_data'"):
        check_data(build_config({"data": {"name": "imagefolder", "root": str(tmp_path), "decode": "gpu", "loader": "ray_data"}}))


def test_one_epoch_of_training_from_a_jpeg_folder_with_decode_gpu(tmp_path):
    from trainables.data.loaders import make_loaders
    from trainables.train.engine import build_model, build_state, train_one_epoch
    from trainables.train.session import TuneSession

    root = jpeg_folder(tmp_path, per_class=8)
    cfg = build_config(
        {
            "data": {
                "name": "imagefolder",
                "root": str(root),
                "img_size": 16,
                "batch_size": 4,
                "augment": "deit",
                "decode": "gpu",
                "loader_workers": 1,
            },
            "model": {"kwargs": {"patch_size": 4, "embed_dim": 32, "depth": 1, "num_heads": 2}},
            "optim": {"epochs": 1, "mixup": 0.8, "cutmix": 1.0},
            "mjp": {"variant": "J"},
        }
    )
    check_data(cfg)
    bundle = load_datasets(cfg)
    loaders = make_loaders(cfg, bundle, TuneSession())
    loaders.set_epoch(0)
    train = loaders.train
    assert loaders.train_size == len(bundle.train) == 16  # 2 classes x 8
    model = build_model(cfg, bundle.shape)
    from trainables.train.engine import make_mixup

    out = train_one_epoch(cfg, build_state(cfg, model, len(train), 1), train, CPU, make_mixup(cfg, bundle.shape.num_classes))
    assert len(train) == 4 and math.isfinite(out["train/loss"]) and out["perf/img_per_s"] > 0
