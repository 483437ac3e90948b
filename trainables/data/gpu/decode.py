"""``data.decode: gpu``: the loader ships encoded JPEG bytes, the training device decodes and augments.

The DataLoader's workers only read files: an item is the file's bytes (uint8 ``[nbytes]``), its
label and its seed; a batch crosses to the training process as one flat byte buffer plus an int64
header (``EncodedBatch``), so receiving it costs two shared-memory segments whatever B. On the training device a batch is decoded at once
(``torchvision.io.decode_jpeg(list, device=...)``: nvJPEG on CUDA, libjpeg-turbo on the CPU), then
``trainables.data.gpu.augment`` applies ``data.augment`` there; the engine gets normalised float
batches already on its device (mixup/cutmix stay in the engine). Only uint8 bytes cross the bus.

Files that are not JPEG (PNG, BMP, ...) are decoded by the loader workers on the CPU, as the CPU
path does (PIL), and shipped as uint8 pixels ``[3, H, W]``; they follow the same device pipeline.
So are the JPEGs whose frame header the batched device decode may refuse (CMYK, progressive:
``jpeg_needs_cpu``). A batch the device decoder still refuses is split in halves around the bad
file (the rest stay batched), and that file alone is decoded on the CPU and moved;
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
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple, Protocol

import numpy as np
import torch
from torch.utils.data import Dataset, Sampler

from trainables.data.folder.image_folder import UnreadableImage, readable_loader
from trainables.data.gpu.augment import DeviceRecipe, augment_batch
from trainables.data.gpu.compiled import CompiledAugment
from trainables.data.gpu.prefetch import prefetched

warnings.filterwarnings(
    "ignore", message="The image decoding and encoding capabilities of TorchVision are deprecated", category=DeprecationWarning
)

JPEG_MAGIC = b"\xff\xd8\xff"


def sample_seed(data_seed: int, epoch: int, index: int, rank: int = 0, repeat: int = 0) -> int:
    """The augmentation seed of one sample in one epoch, in ``[0, 2**62)``."""
    digest = hashlib.blake2b(f"mjp/augment/{data_seed}/{epoch}/{index}/{rank}/{repeat}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 2


class IndexOrder(Protocol):
    """What ``SeededSampler`` wraps: a sized iterable of dataset indices (a torch sampler, a list);
    its ``set_epoch``, where it has one, is forwarded."""

    def __iter__(self) -> Iterator[int]: ...

    def __len__(self) -> int: ...


class SeededSampler(Sampler):
    """Wraps a sampler of indices; yields ``(index, seed)`` and forwards ``set_epoch``."""

    def __init__(self, inner: IndexOrder, data_seed: int, rank: int = 0):
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


#: start-of-frame markers of the JPEGs the device decoder takes: baseline and extended Huffman
DEVICE_SOF = (0xC0, 0xC1)
#: every start-of-frame marker (C4 = DHT, C8 = JPG, CC = DAC are not frames)
ALL_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


def jpeg_needs_cpu(data: bytes) -> bool:
    """Whether a JPEG's frame header says the batched device decode may refuse it: progressive,
    lossless or arithmetic-coded, not 8 bits, or neither 1 nor 3 components (CMYK/YCCK). Reads the
    markers up to the frame header only; a header it cannot parse is left to the decoders."""
    pos = 2
    while pos + 4 <= len(data) and data[pos] == 0xFF:
        marker, length = data[pos + 1], int.from_bytes(data[pos + 2 : pos + 4], "big")
        if marker in ALL_SOF:
            if pos + 10 > len(data):
                return False
            precision, components = data[pos + 4], data[pos + 9]
            return marker not in DEVICE_SOF or precision != 8 or components not in (1, 3)
        if marker == 0xDA:  # start of scan before any frame: malformed
            return False
        pos += 2 + length
    return False


def read_encoded(path: str) -> torch.Tensor:
    """A JPEG file's bytes as uint8 ``[nbytes]``; a JPEG the device decoder may refuse
    (``jpeg_needs_cpu``: CMYK, progressive, ...) and any other image decoded here on the CPU (PIL,
    as the CPU path) to uint8 ``[3, H, W]``: that file alone leaves the batched device decode.
    ``UnreadableImage`` naming the file when it cannot be read."""
    try:
        data = Path(path).read_bytes()
    except OSError as err:
        raise UnreadableImage(path, err) from err
    if data[:3] == JPEG_MAGIC and not jpeg_needs_cpu(data):
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


#: the rows of ``EncodedBatch.header`` (int64, one column per item): where the item lies in the
#: buffer, its byte count, its pixel shape (0, 0, 0 for encoded JPEG bytes), label, seed, index
HEADER = ("offset", "nbytes", "channels", "height", "width", "label", "seed", "index")


class EncodedBatch(NamedTuple):
    """A batch as the loader workers hand it over: every item's bytes in one flat uint8 buffer
        ``[total bytes]`` and an int64 ``[len(HEADER), B]`` header (one row per field, so labels and
    seeds are contiguous, pinned views). Two tensors cross the process
        boundary (two shared-memory segments, not one per image) and the pinning thread pins two."""

    buffer: torch.Tensor
    header: torch.Tensor

    def items(self) -> tuple[list[torch.Tensor], torch.Tensor, torch.Tensor, torch.Tensor]:
        """-> (views into the buffer: uint8 ``[nbytes]`` or ``[3, H, W]``, labels, seeds, indices int64 ``[B]``).
        The views share the buffer's memory (pinned when the buffer is)."""
        datas = []
        for offset, nbytes, channels, height, width, *_ in self.header.T.tolist():
            view = self.buffer[offset : offset + nbytes]
            datas.append(view.view(channels, height, width) if channels else view)
        return datas, self.header[5], self.header[6], self.header[7]


def collate_encoded(items: Sequence[tuple[torch.Tensor, int, int, int]]) -> EncodedBatch:
    """Items (``EncodedImages``) -> one ``EncodedBatch``: the bytes concatenated, the rest in the header."""
    data, labels, seeds, indices = zip(*items)
    sizes = [d.numel() for d in data]
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    shapes = [tuple(d.shape) if d.ndim == 3 else (0, 0, 0) for d in data]
    header = np.vstack([offsets, sizes, np.array(shapes, dtype=np.int64).reshape(-1, 3).T, labels, seeds, indices]).astype(np.int64)
    buffer = torch.cat([d.reshape(-1) for d in data]) if data else torch.empty(0, dtype=torch.uint8)
    return EncodedBatch(buffer, torch.from_numpy(header))


def _decode_cpu(data: torch.Tensor, device: torch.device) -> torch.Tensor | None:
    """One JPEG by libjpeg-turbo on the CPU, moved to ``device``; None if it cannot be read."""
    from torchvision.io import ImageReadMode, decode_jpeg

    try:
        return decode_jpeg(data.cpu(), mode=ImageReadMode.RGB).to(device, non_blocking=True)
    except RuntimeError:
        return None


def _decode_jpegs(datas: list[torch.Tensor], device: torch.device) -> list[torch.Tensor | None]:
    """Batched device decode; when the decoder refuses the batch, the halves are tried (so a batch
    with k bad files costs about 2 k log2(B) calls, and the good files stay batched), and a single
    refused file goes to the CPU decoder."""
    from torchvision.io import ImageReadMode, decode_jpeg

    if device.type == "cpu" and len(datas) == 1:
        return [_decode_cpu(datas[0], device)]
    try:
        return list(decode_jpeg(datas, mode=ImageReadMode.RGB, device=device))
    except RuntimeError:
        if len(datas) == 1:
            return [_decode_cpu(datas[0], device)]
        half = len(datas) // 2
        return _decode_jpegs(datas[:half], device) + _decode_jpegs(datas[half:], device)


def decode_on_device(datas: Sequence[torch.Tensor], device: torch.device) -> list[torch.Tensor | None]:
    """A batch of encoded JPEGs (uint8 ``[nbytes]``) and pre-decoded images (uint8 ``[3, H, W]``) ->
    uint8 ``[3, H_i, W_i]`` on ``device``, the JPEGs in one batched ``decode_jpeg`` call (split only
    around files it refuses); None for an item no decoder reads."""
    jpegs = [i for i, d in enumerate(datas) if d.ndim == 1 and d.numel() > 0]
    out: list[torch.Tensor | None] = [None] * len(datas)
    for i, image in zip(jpegs, _decode_jpegs([datas[i] for i in jpegs], device) if jpegs else []):
        out[i] = image
    for i, d in enumerate(datas):
        if d.ndim == 3:
            out[i] = d.to(device, non_blocking=True)
    return out


class DeviceAugmentLoader:
    """An epoch of ``(images float32 [B, 3, S, S], labels int64 [B])`` on ``device``, from a DataLoader
    of encoded batches (``collate_encoded``): decoded and augmented there, ``prefetch`` batches ahead
    in a thread (``trainables.data.gpu.prefetch``). ``len`` = batches per epoch. ``compile_backend``: the
    work after the crop compiled once with it (``runtime.compile``: ``compiled.CompiledAugment``), on
    this thread before the first batch; None runs it eagerly."""

    def __init__(
        self,
        loader: Any,
        sampler: SeededSampler,
        recipe: DeviceRecipe,
        device: torch.device,
        dataset: EncodedImages,
        skipped_log: Path | None = None,
        prefetch: int = 2,
        compile_backend: str | None = None,
    ):
        self.loader, self.sampler, self.recipe, self.device = loader, sampler, recipe, torch.device(device)
        self.dataset, self.skipped_log, self.prefetch = dataset, skipped_log, prefetch
        self.finish = CompiledAugment(recipe, compile_backend) if compile_backend else None

    def set_epoch(self, epoch: int) -> None:
        self.sampler.set_epoch(epoch)

    def __len__(self) -> int:
        return len(self.loader)

    def _replace_unreadable(
        self, images: list[torch.Tensor | None], labels: torch.Tensor, seeds: torch.Tensor, indices: torch.Tensor
    ) -> tuple[list[torch.Tensor], torch.Tensor]:
        """Fail naming the first unreadable file, or (skip) log it and reuse the next readable image of the batch."""
        bad = [i for i, im in enumerate(images) if im is None]
        if not bad:
            return [im for im in images if im is not None], labels
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
        return [im for im in images if im is not None], labels  # every slot holds an image now

    def prepare(self, batch: EncodedBatch) -> tuple[torch.Tensor, torch.Tensor]:
        """One encoded batch -> ``(images float32 [B, 3, S, S], labels int64 [B])`` on the device."""
        datas, labels, seeds, indices = batch.items()
        images, labels = self._replace_unreadable(decode_on_device(datas, self.device), labels, seeds, indices)
        x = augment_batch(images, seeds.tolist(), self.recipe, self.finish)
        return x, labels.to(self.device, non_blocking=True)

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """Batch n+1 is read, decoded and augmented (its own CUDA stream) while the caller trains on batch n."""
        if self.finish is not None:  # compiled here: a compile in the prefetch thread would run beside the step
            self.finish.warm_up(self.loader.batch_size, self.device)
        return prefetched(self.loader, self.prepare, self.device, self.prefetch)
