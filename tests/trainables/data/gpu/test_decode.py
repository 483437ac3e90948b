"""``data.decode: gpu``'s decode: encoded files read by the loader and decoded in batches on the
training device (here device="cpu", the same code that runs on CUDA; with a GPU, the CUDA case
against it), PNGs, greyscale, CMYK and progressive JPEGs, unreadable files, and a batch's way from
the loader workers."""

import numpy as np
import pytest
import torch
from PIL import Image
from torch.utils.data import DataLoader, SequentialSampler

from tests.trainables.data.gpu.photos import CPU, jpeg_folder, photo
from trainables.data.folder.image_folder import UnreadableImage
from trainables.data.gpu.augment import DeviceRecipe, augment_batch
from trainables.data.gpu.decode import DeviceAugmentLoader, EncodedImages, SeededSampler, collate_encoded, decode_on_device


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
