"""``data.decode: gpu`` on the CPU: encoded files through the loader, decode + DeiT augmentations on
the training device (here device="cpu", the same code that runs on CUDA)."""

import math

import numpy as np
import pytest
import torch
from PIL import Image
from torch.utils.data import DataLoader, SequentialSampler

from trainables.config.build import build_config
from trainables.data.datasets import load_datasets
from trainables.data.folder.image_folder import UnreadableImage
from trainables.data.gpu.augment import DeviceRecipe, augment_batch, hash_normal
from trainables.data.gpu.decode import DeviceAugmentLoader, EncodedImages, SeededSampler, collate_encoded, decode_on_device
from trainables.data.gpu.randaugment import OPS, apply_op, level_arg
from trainables.data.info import check_data
from trainables.errors import DataError

CPU = torch.device("cpu")


def photo(rng, h, w):
    """A smooth random image (gradients + blobs): JPEG keeps it, unlike white noise."""
    ys, xs = np.mgrid[0:h, 0:w] / max(h, w)
    a, b, c = rng.uniform(0.5, 4, 3)
    img = np.stack([np.sin(a * xs * 6 + c), np.cos(b * ys * 5), np.sin((xs + ys) * c * 4)], -1)
    return ((img + 1) * 127.5).astype(np.uint8)


def jpeg_folder(root, classes=("cat", "dog"), per_class=6, sizes=((40, 52), (48, 36), (33, 33))):
    rng = np.random.default_rng(0)
    for split in ("train", "val"):
        for c in classes:
            (root / split / c).mkdir(parents=True)
            for i in range(per_class):
                h, w = sizes[i % len(sizes)]
                Image.fromarray(photo(rng, h, w)).save(root / split / c / f"{i}.jpg", quality=92)
    return root


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


def test_batched_decode_equals_pil_up_to_jpeg_rounding(tmp_path):
    root = jpeg_folder(tmp_path, per_class=3)
    ds = EncodedImages(root / "train")
    items = [ds[(i, 0)] for i in range(len(ds))]
    decoded = decode_on_device([d for d, *_ in items], CPU)
    for (path, _), image in zip(ds.samples, decoded):
        reference = torch.from_numpy(np.array(Image.open(path).convert("RGB"))).permute(2, 0, 1)
        assert image.shape == reference.shape and (image.int() - reference.int()).abs().float().mean() < 1.5


def test_png_files_are_decoded_by_the_loader_and_follow_the_same_pipeline(tmp_path):
    (tmp_path / "c").mkdir()
    Image.fromarray(photo(np.random.default_rng(1), 30, 20)).save(tmp_path / "c" / "a.png")
    ds = EncodedImages(tmp_path)
    data, label, seed, index = ds[(0, 5)]
    assert data.shape == (3, 30, 20) and data.dtype == torch.uint8 and (label, seed, index) == (0, 5, 0)
    x = augment_batch(decode_on_device([data], CPU), [seed], DeviceRecipe(16))
    assert x.shape == (1, 3, 16, 16)


def test_an_unreadable_jpeg_is_named_or_skipped(tmp_path):
    root = jpeg_folder(tmp_path, per_class=2)
    bad = root / "train" / "cat" / "0.jpg"
    bad.write_bytes(bad.read_bytes()[:40])  # JPEG header, no image
    for mode in ("fail", "skip"):
        ds = EncodedImages(root / "train", on_bad_image=mode)
        sampler = SeededSampler(SequentialSampler(ds), 0)
        loader = DataLoader(ds, sampler=sampler, batch_size=4, collate_fn=collate_encoded)
        batches = DeviceAugmentLoader(loader, sampler, DeviceRecipe(16), CPU, ds, tmp_path / f"skipped-{mode}.txt")
        if mode == "fail":
            with pytest.raises(UnreadableImage, match="0.jpg"):
                list(batches)
        else:
            ((x, y),) = list(batches)
            assert x.shape == (4, 3, 16, 16) and (tmp_path / "skipped-skip.txt").read_text() == f"{bad}\n"


@pytest.mark.parametrize("op", OPS)
def test_every_randaugment_op_keeps_shape_and_changes_the_image(op):
    x = torch.from_numpy(photo(np.random.default_rng(2), 20, 20)).permute(2, 0, 1)[None].repeat(2, 1, 1, 1).contiguous()
    args = [level_arg(op, 9.0, negate=False), level_arg(op, 9.0, negate=True)]
    out = apply_op(op, x, args, (124, 116, 104))
    assert out.shape == x.shape and out.dtype == torch.uint8
    assert not torch.equal(out, x)


def test_ops_match_pil_where_they_are_lookups_or_blends():
    from PIL import ImageEnhance, ImageOps

    img = photo(np.random.default_rng(3), 16, 16)
    x = torch.from_numpy(img).permute(2, 0, 1)[None]
    pil = Image.fromarray(img)
    expected = {
        "SolarizeIncreasing": ImageOps.solarize(pil, 128),
        "PosterizeIncreasing": ImageOps.posterize(pil, 2),
        "ColorIncreasing": ImageEnhance.Color(pil).enhance(1.6),
        "ContrastIncreasing": ImageEnhance.Contrast(pil).enhance(0.4),
        "BrightnessIncreasing": ImageEnhance.Brightness(pil).enhance(1.3),
        "SharpnessIncreasing": ImageEnhance.Sharpness(pil).enhance(1.8),
    }
    args = {
        "SolarizeIncreasing": 128,
        "PosterizeIncreasing": 2,
        "ColorIncreasing": 1.6,
        "ContrastIncreasing": 0.4,
        "BrightnessIncreasing": 1.3,
        "SharpnessIncreasing": 1.8,
    }
    for op, want in expected.items():
        got = apply_op(op, x, [float(args[op])], (0, 0, 0))[0].permute(1, 2, 0).numpy().astype(int)
        assert np.abs(got - np.asarray(want, dtype=int)).max() <= 1, op


def test_affine_ops_follow_pil_s_geometry():
    """A translation by whole pixels is exact, whatever the interpolation; the fill is timm's mean colour."""
    img = photo(np.random.default_rng(4), 20, 20)
    x = torch.from_numpy(img).permute(2, 0, 1)[None]
    got = apply_op("TranslateXRel", x, [0.25], (124, 116, 104))[0].permute(1, 2, 0).numpy()
    want = np.asarray(Image.fromarray(img).transform((20, 20), Image.AFFINE, (1, 0, 5, 0, 1, 0), fillcolor=(124, 116, 104)))
    assert np.array_equal(got, want)


def test_erasing_noise_is_standard_normal_and_keyed():
    a = hash_normal(torch.tensor([1, 2]), (3, 32, 32))
    assert torch.equal(a[1], hash_normal(torch.tensor([2]), (3, 32, 32))[0]) and not torch.equal(a[0], a[1])
    assert abs(a.mean().item()) < 0.05 and abs(a.std().item() - 1) < 0.05 and a.abs().max() < 6.5
    # both normals of each Box-Muller pair are used: still N(0, 1), neighbours uncorrelated, odd sizes too
    from scipy import stats

    many = hash_normal(torch.arange(64) * 7919 + 2**40, (3, 32, 32)).flatten().numpy()
    assert stats.kstest(many, "norm").statistic < 1.95 / math.sqrt(len(many))  # alpha 0.001
    assert abs(np.corrcoef(many[0::2], many[1::2])[0, 1]) < 0.01
    odd = hash_normal(torch.tensor([5, 6]), (3, 5, 5))
    assert odd.shape == (2, 3, 5, 5) and torch.equal(odd[1], hash_normal(torch.tensor([6]), (3, 5, 5))[0])


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


def test_random_choices_follow_timm_s_deit_recipe():
    """Over many seeds: each of the 15 ops drawn alike, applied half the time at magnitude N(9, 0.5)
    (capped below 10), flips half the time, erasing a quarter of the time, crops inside the image."""
    from trainables.data.gpu.augment import draw_sample

    recipe = DeviceRecipe(224)
    draws = [draw_sample(seed, 375, 500, recipe) for seed in range(3000)]
    applied = [op for d in draws for op, _ in d.ops]
    assert abs(len(applied) / (2 * len(draws)) - 0.5) < 0.03
    counts = np.array([applied.count(op) for op in OPS])
    assert counts.min() > 0.75 * counts.mean() and counts.max() < 1.25 * counts.mean()
    posterize = [arg for d in draws for op, arg in d.ops if op == "PosterizeIncreasing"]
    assert set(posterize) <= {1.0, 2.0} and min(posterize) >= 1  # 4 - int(m / 10 * 4) with m < 10
    assert abs(np.mean([d.flip for d in draws]) - 0.5) < 0.03
    assert abs(np.mean([d.erase is not None for d in draws]) - 0.25) < 0.03
    for d in draws:
        top, left, h, w = d.crop
        assert top >= 0 and top + h <= 375 and left >= 0 and left + w <= 500 and h * w >= 0.07 * 375 * 500


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_on_cuda_the_pipeline_matches_its_cpu_run(tmp_path):
    """nvJPEG and CUDA kernels against the CPU run of the same seeds: same shapes and erased boxes,
    pixels equal up to the decoders' rounding (a threshold op may flip a few pixels)."""
    root = jpeg_folder(tmp_path)
    ds = EncodedImages(root / "train")
    items = [ds[(i, 1000 + i)] for i in range(len(ds))]
    datas, seeds = [d for d, *_ in items], [s for _, _, s, _ in items]
    recipe = DeviceRecipe(24, "deit", re_prob=1.0)
    cuda = torch.device("cuda")
    on_gpu = augment_batch(decode_on_device([d.pin_memory() for d in datas], cuda), seeds, recipe)
    on_cpu = augment_batch(decode_on_device(datas, CPU), seeds, recipe)
    assert on_gpu.device.type == "cuda" and on_gpu.shape == on_cpu.shape == (12, 3, 24, 24)
    diff = (on_gpu.cpu() - on_cpu).abs()
    assert diff.median() < 0.05 and (diff < 0.2).float().mean() > 0.9


def test_grayscale_and_cmyk_jpegs_decode_to_rgb_as_pil_does(tmp_path):
    img = photo(np.random.default_rng(5), 20, 30)
    Image.fromarray(img[:, :, 0]).save(tmp_path / "gray.jpg")
    Image.fromarray(img).convert("CMYK").save(tmp_path / "cmyk.jpg")
    paths = [tmp_path / "gray.jpg", tmp_path / "cmyk.jpg"]
    from trainables.data.gpu.decode import read_encoded

    for path, image in zip(paths, decode_on_device([read_encoded(str(p)) for p in paths], CPU)):
        reference = np.array(Image.open(path).convert("RGB")).astype(int)
        assert image.shape == (3, 20, 30) and np.abs(image.permute(1, 2, 0).numpy().astype(int) - reference).mean() < 1.5


def test_small_and_none_recipes(tmp_path):
    """``small``: crop + flip only (seeded); ``none``: timm's eval resize + centre crop, the same for every seed."""
    image = torch.from_numpy(photo(np.random.default_rng(6), 40, 60)).permute(2, 0, 1).contiguous()
    none = [augment_batch([image], [s], DeviceRecipe(16, "none")) for s in (1, 2)]
    assert torch.equal(none[0], none[1]) and none[0].shape == (1, 3, 16, 16)
    small = [augment_batch([image], [s], DeviceRecipe(16, "small")) for s in (1, 2, 1)]
    assert torch.equal(small[0], small[2]) and not torch.equal(small[0], small[1])


def test_jpegs_the_device_decoder_may_refuse_are_decoded_by_the_loader(tmp_path):
    """CMYK and progressive JPEGs leave the batched device decode (PIL decodes them in the loader
    worker, as the CPU path does); baseline RGB and greyscale ones stay encoded."""
    from trainables.data.gpu.decode import jpeg_needs_cpu, read_encoded

    img = photo(np.random.default_rng(7), 20, 30)
    Image.fromarray(img).save(tmp_path / "rgb.jpg")
    Image.fromarray(img[:, :, 0]).save(tmp_path / "gray.jpg")
    Image.fromarray(img).convert("CMYK").save(tmp_path / "cmyk.jpg")
    Image.fromarray(img).save(tmp_path / "progressive.jpg", progressive=True)
    needs = {p.stem: jpeg_needs_cpu(p.read_bytes()) for p in tmp_path.glob("*.jpg")}
    assert needs == {"rgb": False, "gray": False, "cmyk": True, "progressive": True}
    assert not jpeg_needs_cpu(b"\xff\xd8\xff\xe0\x00")  # truncated: left to the decoders
    for stem in ("cmyk", "progressive"):
        data = read_encoded(str(tmp_path / f"{stem}.jpg"))
        assert data.shape == (3, 20, 30)
        assert torch.equal(data.permute(1, 2, 0), torch.from_numpy(np.array(Image.open(tmp_path / f"{stem}.jpg").convert("RGB"))))


def test_a_refused_file_leaves_the_batched_decode_alone(tmp_path, monkeypatch):
    """One corrupt JPEG in 16: the other 15 decode as they do alone, in about 2 log2(16) batched
    calls (halves around the bad file), not 16 single ones; the bad one is None."""
    import torchvision.io

    from trainables.data.gpu.decode import read_encoded

    root = jpeg_folder(tmp_path, per_class=8)
    files = sorted((root / "train").rglob("*.jpg"))
    datas = [read_encoded(str(p)) for p in files]
    datas[5] = datas[5][:60].clone()  # header only
    calls = []
    real = torchvision.io.decode_jpeg

    def counting(data, *args, **kwargs):
        calls.append(len(data) if isinstance(data, list) else 1)
        return real(data, *args, **kwargs)

    monkeypatch.setattr(torchvision.io, "decode_jpeg", counting)
    decoded = decode_on_device(datas, CPU)
    assert decoded[5] is None and len(calls) <= 2 * 4 + 2 and max(calls) == 16
    for i, image in enumerate(decoded):
        if i != 5:
            assert torch.equal(image, real(datas[i], mode=torchvision.io.ImageReadMode.RGB))


def test_a_batch_crosses_from_the_workers_as_one_buffer_and_a_header(tmp_path):
    from trainables.data.gpu.decode import EncodedBatch

    (tmp_path / "c").mkdir()
    Image.fromarray(photo(np.random.default_rng(8), 30, 20)).save(tmp_path / "c" / "a.png")
    Image.fromarray(photo(np.random.default_rng(9), 24, 28)).save(tmp_path / "c" / "b.jpg")
    ds = EncodedImages(tmp_path)
    items = [ds[(0, 11)], ds[(1, 2**62 - 1)]]
    batch = collate_encoded(items)
    assert isinstance(batch, EncodedBatch) and batch.buffer.dtype == torch.uint8 and batch.buffer.ndim == 1
    datas, labels, seeds, indices = batch.items()
    assert [torch.equal(a, b) for a, (b, *_) in zip(datas, items)] == [True, True]
    assert datas[0].shape == (3, 30, 20) and datas[1].ndim == 1
    assert seeds.tolist() == [11, 2**62 - 1] and indices.tolist() == [0, 1] and labels.tolist() == [0, 0]
    assert datas[1].untyped_storage().data_ptr() == batch.buffer.untyped_storage().data_ptr()  # views, no copies
