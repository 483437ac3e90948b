"""``data.decode: gpu``: the loader ships encoded JPEG bytes, the training device decodes and augments.

The DataLoader's workers only read files: an item is the file's bytes (uint8 ``[nbytes]``), its
label and its seed. On the training device a batch is decoded at once
(``torchvision.io.decode_jpeg(list, device=...)``: nvJPEG on CUDA, libjpeg-turbo on the CPU), then
``trainables.device_augment`` applies ``data.augment`` there; the engine gets normalised float
batches already on its device (mixup/cutmix stay in the engine). Only uint8 bytes cross the bus.

Files that are not JPEG (PNG, BMP, ...) are decoded by the loader workers on the CPU, as the CPU
path does (PIL), and shipped as uint8 pixels ``[3, H, W]``; they follow the same device pipeline.
A JPEG the device decoder refuses (CMYK on some nvJPEG versions) is decoded on the CPU and moved;
one no decoder reads fails the run naming its file, or with ``data.on_bad_image: skip`` is
replaced by another image of its batch and its path logged.

Seeds: sample ``index`` in ``epoch`` gets ``hash(data.seed, epoch, index, rank, k)``, ``k`` counting
earlier copies of the index in this rank's epoch (repeated augmentation), computed by the sampler
in the main process, so augmentations depend neither on the number of loader workers nor on which
batch a sample lands in.
"""

from __future__ import annotations

import hashlib
import warnings
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np
import torch
from torch.utils.data import Dataset, Sampler

from trainables.device_augment import DeviceRecipe, augment_batch

warnings.filterwarnings("ignore", message="The image decoding and encoding capabilities of TorchVision are deprecated", category=DeprecationWarning)
from trainables.image_folder import UnreadableImage, readable_loader

JPEG_MAGIC = b"\xff\xd8\xff"


def sample_seed(data_seed: int, epoch: int, index: int, rank: int = 0, repeat: int = 0) -> int:
    """The augmentation seed of one sample in one epoch, in ``[0, 2**62)``."""
    digest = hashlib.blake2b(f"mjp/augment/{data_seed}/{epoch}/{index}/{rank}/{repeat}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 2


class SeededSampler(Sampler):
    """Wraps a sampler of indices; yields ``(index, seed)`` and forwards ``set_epoch``."""

    def __init__(self, inner: Sampler, data_seed: int, rank: int = 0):
        self.inner, self.data_seed, self.rank, self.epoch = inner, data_seed, rank, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch
        if hasattr(self.inner, "set_epoch"):
            self.inner.set_epoch(epoch)

    def __len__(self) -> int:
        return len(self.inner)

    def __iter__(self) -> Iterator[tuple[int, int]]:
        seen: dict[int, int] = {}
        for index in self.inner:
            index = int(index)
            repeat = seen.get(index, 0)
            seen[index] = repeat + 1
            yield index, sample_seed(self.data_seed, self.epoch, index, self.rank, repeat)


def read_encoded(path: str) -> torch.Tensor:
    """A JPEG file's bytes as uint8 ``[nbytes]``; any other image decoded on the CPU (PIL) to uint8
    ``[3, H, W]``; ``UnreadableImage`` naming the file when it cannot be read."""
    try:
        data = Path(path).read_bytes()
    except OSError as err:
        raise UnreadableImage(path, err) from err
    if data[:3] == JPEG_MAGIC:
        return torch.frombuffer(bytearray(data), dtype=torch.uint8)
    return torch.from_numpy(np.array(readable_loader(path), dtype=np.uint8)).permute(2, 0, 1).contiguous()


class EncodedImages(Dataset):
    """An ImageFolder split read as encoded bytes. ``dataset[(index, seed)]`` ->
    ``(uint8 [nbytes] or [3, H, W], label, seed, index)``; ``on_bad_image="skip"`` turns a non-JPEG
    file PIL cannot read into an empty tensor for the device stage to replace."""

    def __init__(self, root: str | Path, limit: int | None = None, on_bad_image: str = "fail"):
        from torchvision.datasets import ImageFolder

        folder = ImageFolder(str(root), loader=str)  # lists the files; nothing is opened
        self.classes, self.on_bad_image = folder.classes, on_bad_image
        self.samples = folder.samples[:limit] if limit is not None else folder.samples

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, key: tuple[int, int]) -> tuple[torch.Tensor, int, int, int]:
        index, seed = key
        path, label = self.samples[index]
        try:
            data = read_encoded(path)
        except UnreadableImage:
            if self.on_bad_image != "skip":
                raise
            data = torch.empty(0, dtype=torch.uint8)
        return data, label, seed, index


def collate_encoded(items: Sequence[tuple[torch.Tensor, int, int, int]]) -> tuple[list[torch.Tensor], torch.Tensor, torch.Tensor, torch.Tensor]:
    """Items -> (list of uint8 tensors, labels int64 ``[B]``, seeds int64 ``[B]``, indices int64 ``[B]``)."""
    data, labels, seeds, indices = zip(*items)
    return list(data), torch.tensor(labels), torch.tensor(seeds), torch.tensor(indices)


def _decode_one(data: torch.Tensor, device: torch.device) -> torch.Tensor | None:
    """One item on ``device`` as uint8 ``[3, H, W]``: the device decoder, then the CPU one; None if neither reads it."""
    from torchvision.io import ImageReadMode, decode_jpeg

    if data.ndim == 3:
        return data.to(device)
    if data.numel() == 0:
        return None
    for where in dict.fromkeys([device, torch.device("cpu")]):
        try:
            return decode_jpeg(data, mode=ImageReadMode.RGB, device=where).to(device)
        except RuntimeError:
            continue
    return None


def decode_on_device(datas: Sequence[torch.Tensor], device: torch.device) -> list[torch.Tensor | None]:
    """A batch of encoded JPEGs (uint8 ``[nbytes]``) and pre-decoded images (uint8 ``[3, H, W]``) ->
    uint8 ``[3, H_i, W_i]`` on ``device``, the JPEGs in one batched ``decode_jpeg`` call; None for an
    item no decoder reads."""
    from torchvision.io import ImageReadMode, decode_jpeg

    jpegs = [i for i, d in enumerate(datas) if d.ndim == 1 and d.numel() > 0]
    out: list[torch.Tensor | None] = [None] * len(datas)
    try:
        decoded = decode_jpeg([datas[i] for i in jpegs], mode=ImageReadMode.RGB, device=device) if jpegs else []
        for i, image in zip(jpegs, decoded):
            out[i] = image
    except RuntimeError:  # one bad file fails the whole batch: find it, decode the rest one by one
        for i in jpegs:
            out[i] = _decode_one(datas[i], device)
    for i, d in enumerate(datas):
        if d.ndim == 3:
            out[i] = d.to(device, non_blocking=True)
    return out


class DeviceAugmentLoader:
    """An epoch of ``(images float32 [B, 3, S, S], labels int64 [B])`` on ``device``, from a DataLoader
    of encoded batches (``collate_encoded``): decoded and augmented there. ``len`` = batches per epoch."""

    def __init__(self, loader: Any, sampler: SeededSampler, recipe: DeviceRecipe, device: torch.device,
                 dataset: EncodedImages, skipped_log: Path | None = None):
        self.loader, self.sampler, self.recipe, self.device = loader, sampler, recipe, torch.device(device)
        self.dataset, self.skipped_log = dataset, skipped_log

    def set_epoch(self, epoch: int) -> None:
        self.sampler.set_epoch(epoch)

    def __len__(self) -> int:
        return len(self.loader)

    def _replace_unreadable(self, images: list[torch.Tensor | None], labels: torch.Tensor, seeds: torch.Tensor, indices: torch.Tensor) -> tuple[list[torch.Tensor], torch.Tensor]:
        """Fail naming the first unreadable file, or (skip) log it and reuse the next readable image of the batch."""
        bad = [i for i, im in enumerate(images) if im is None]
        if not bad:
            return images, labels  # type: ignore[return-value]
        paths = [self.dataset.samples[int(indices[i])][0] for i in bad]
        if self.dataset.on_bad_image != "skip":
            raise UnreadableImage(paths[0], "no JPEG decoder reads it")
        if self.skipped_log is not None:
            with open(self.skipped_log, "a") as fh:
                fh.write("".join(p + "\n" for p in paths))
        good = [i for i, im in enumerate(images) if im is not None]
        if not good:
            from trainables.errors import DataError

            raise DataError(f"no readable image in a batch of {len(images)} (first: {paths[0]})")
        labels = labels.clone()
        for k, i in enumerate(bad):
            j = good[k % len(good)]
            images[i], labels[i], seeds[i] = images[j], labels[j], seeds[j] ^ (1 << 61)
        return images, labels  # type: ignore[return-value]

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        for datas, labels, seeds, indices in self.loader:
            images, labels = self._replace_unreadable(decode_on_device(datas, self.device), labels, seeds, indices)
            x = augment_batch(images, seeds.tolist(), self.recipe)
            yield x, labels.to(self.device, non_blocking=True)
