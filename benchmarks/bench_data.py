"""The input path, measured: per-stage costs of both decode paths, and the torch DataLoader against
Ray Data on the same cores in one run.

Data: a synthetic ImageNet-like folder of real JPEGs (scikit-image's sample photographs, cut and
resized to 500x375, ImageNet's typical size), made on the fly; DeiT's training transforms at 224 px.

1. Stages, one process, one thread, img/s: read the file's bytes; ``data.decode: cpu`` (PIL decode,
   timm's transforms); ``data.decode: gpu`` (one batched ``torchvision.io.decode_jpeg``, then
   ``trainables.data.gpu.augment``) on the CPU and, with ``--device cuda``, on the GPU with the
   host-to-device copy of the encoded bytes (and, for comparison, of the float batch the CPU path
   ships).
2. Host budget of ``data.decode: gpu`` per batch, on the CPU: aten ops and main-thread CPU ms of
   ``augment_batch`` at B = 256 and 512 (issue cost: tiny images), main-process CPU ms to receive a
   batch of 256 from 2 loader workers as one flat buffer (``EncodedBatch``) and as one tensor per
   image (the layout before), and (with CUDA) to pin each.
3. Loaders, ``--rounds`` interleaved rounds (DataLoader, Ray Data, Ray Data as it was laid out
   before) so that the machine's other load falls on all of them alike; per round one epoch each:
   img/s over the epoch and from its first batch on (steady), and the CPU seconds per 1,000 images
   of every process involved (loader workers or Ray tasks, the consuming process, Ray's own); and
   the consumer's CPU for Ray Data's block -> torch conversion alone, without an execution running.

    python benchmarks/bench_data.py [--images 1000] [--rounds 3] [--device cpu|cuda] [--out BENCHMARKS.md]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import ray
import torch
from common import append, environment
from PIL import Image
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.data import DataLoader

from trainables.config.build import build_config
from trainables.data.datasets import load_datasets
from trainables.data.folder.image_folder import IMAGE_EXTENSIONS
from trainables.data.gpu.augment import DeviceRecipe, augment_batch, draw_sample
from trainables.data.gpu.decode import SeededSampler, collate_encoded, decode_on_device
from trainables.data.ray_data import DECODE_BATCH, decode_and_augment, train_dataset
from trainables.data.transforms import image_transforms
from trainables.launch.ray_runtime import console_logs_to, ensure_ray

CLASSES = 8
BATCH = 64


def photos() -> list[np.ndarray]:
    from skimage import data

    names = ("astronaut", "coffee", "chelsea", "rocket", "hubble_deep_field", "immunohistochemistry", "retina", "cat")
    return [getattr(data, n)() for n in names if hasattr(data, n)]


def make_folder(root: Path, n: int, seed: int = 0) -> Path:
    """``n`` training JPEGs of 500x375 in ``CLASSES`` classes (and a small val split)."""
    rng = np.random.default_rng(seed)
    sources = [p for p in photos() if p.ndim == 3 and p.shape[2] == 3]
    for split, count in (("train", n), ("val", CLASSES)):
        for i in range(count):
            src = sources[i % len(sources)]
            h, w = src.shape[:2]
            top, left = rng.integers(0, max(1, h // 4)), rng.integers(0, max(1, w // 4))
            crop = Image.fromarray(src[top : top + 3 * h // 4, left : left + 3 * w // 4]).resize((500, 375), Image.BICUBIC)
            folder = root / split / f"c{i % CLASSES}"
            folder.mkdir(parents=True, exist_ok=True)
            crop.save(folder / f"{i}.jpg", quality=90)
    return root


def config(root: Path, loader: str, decode: str = "cpu"):
    return build_config(
        {
            "data": {
                "name": "imagefolder",
                "root": str(root),
                "img_size": 224,
                "augment": "deit",
                "loader": loader,
                "decode": decode,
                "batch_size": BATCH,
            }
        }
    )


# ---------------------------------------------------------------- 1. stages


def _rate(fn: Callable[[], Any], n: int, sync: Callable[[], None] = lambda: None) -> float:
    fn()  # warm-up (imports, kernels, caches)
    sync()
    start = time.perf_counter()
    fn()
    sync()
    return n / (time.perf_counter() - start)


def stage_rates(root: Path, n: int, device: str) -> list[tuple[str, str, float | None]]:
    """(path, stage, img/s) rows; None where the stage needs a GPU this run does not have."""
    files = sorted(root.glob("train/*/*.jpg"))[:n]
    blobs = [f.read_bytes() for f in files]
    transform = image_transforms(config(root, "torch").data, 224, True)
    pictures = [Image.open(f).convert("RGB") for f in files]
    encoded = [torch.frombuffer(bytearray(b), dtype=torch.uint8) for b in blobs]
    recipe = DeviceRecipe(224, "deit")
    seeds = list(range(len(files)))
    cpu = torch.device("cpu")
    decoded_cpu = decode_on_device(encoded, cpu)
    rows: list[tuple[str, str, float | None]] = [
        ("both", "read the file's bytes", _rate(lambda: [f.read_bytes() for f in files], n)),
        ("cpu", "decode (PIL)", _rate(lambda: [Image.open(f).convert("RGB") for f in files], n)),
        ("cpu", "augment (timm, PIL), to a float tensor", _rate(lambda: [transform(p) for p in pictures], n)),
        ("gpu path on the CPU", "decode (decode_jpeg, one batched call)", _rate(lambda: decode_on_device(encoded, cpu), n)),
        ("gpu path on the CPU", "augment (device_augment)", _rate(lambda: augment_batch(decoded_cpu, seeds, recipe), n)),
    ]
    if device == "cuda" and torch.cuda.is_available():
        gpu = torch.device("cuda")
        sync = torch.cuda.synchronize
        pinned = [e.pin_memory() for e in encoded]
        floats = torch.empty(len(files), 3, 224, 224).pin_memory()
        decoded_gpu = decode_on_device(pinned, gpu)
        rows += [
            ("gpu", "H2D: encoded bytes (pinned)", _rate(lambda: [p.to(gpu, non_blocking=True) for p in pinned], n, sync)),
            ("gpu", "decode (nvJPEG, one batched call)", _rate(lambda: decode_on_device(encoded, gpu), n, sync)),
            ("gpu", "augment (device_augment)", _rate(lambda: augment_batch(decoded_gpu, seeds, recipe), n, sync)),
            ("cpu", "H2D: the float batch the CPU path ships (pinned)", _rate(lambda: floats.to(gpu, non_blocking=True), n, sync)),
        ]
    else:
        rows += [
            ("gpu", stage, None)
            for stage in ("H2D: encoded bytes (pinned)", "decode (nvJPEG, one batched call)", "augment (device_augment)")
        ]
    return rows


# ---------------------------------------------------------------- 3. host budget per batch (data.decode: gpu)


class _InMemoryJpegs(torch.utils.data.Dataset):
    """``EncodedImages``' items from bytes held in memory, so the workers' file reads do not count."""

    def __init__(self, blobs: list[bytes]):
        self.blobs = blobs

    def __len__(self) -> int:
        return 1 << 30

    def __getitem__(self, key: tuple[int, int]) -> tuple[torch.Tensor, int, int, int]:
        index, seed = key
        return torch.frombuffer(bytearray(self.blobs[index % len(self.blobs)]), dtype=torch.uint8), 0, seed, index


def collate_as_list(items: list[tuple[torch.Tensor, int, int, int]]) -> tuple[list[torch.Tensor], torch.Tensor, torch.Tensor, torch.Tensor]:
    """The layout before ``EncodedBatch``: one tensor (one shared-memory segment) per image."""
    data, labels, seeds, indices = zip(*items)
    return list(data), torch.tensor(labels), torch.tensor(seeds), torch.tensor(indices)


def handover_ms(blobs: list[bytes], batch: int, collate: Callable[[list], Any], batches: int = 6) -> float:
    """Main-thread CPU ms to receive one batch from 2 loader workers (unpickling, shared memory)."""
    sampler = SeededSampler(list(range(batch * (batches + 1))), 0)
    loader = DataLoader(_InMemoryJpegs(blobs), sampler=sampler, batch_size=batch, collate_fn=collate, num_workers=2, prefetch_factor=2)
    it = iter(loader)
    next(it)  # workers started
    spent = []
    for _ in range(batches):
        start = time.thread_time()
        next(it)
        spent.append(time.thread_time() - start)
    return 1e3 * statistics.median(spent)


def pin_ms(blobs: list[bytes], batch: int, flat: bool) -> float | None:
    """Main-process CPU ms to pin one batch: the flat buffer + header, or one tensor per image."""
    if not torch.cuda.is_available():
        return None
    items = [(torch.frombuffer(bytearray(blobs[i % len(blobs)]), dtype=torch.uint8), 0, i, i) for i in range(batch)]
    tensors = list(collate_encoded(items)) if flat else collate_as_list(items)[0]
    [t.pin_memory() for t in tensors]  # warm the caching host allocator
    start = time.thread_time()
    [t.pin_memory() for t in tensors]
    return 1e3 * (time.thread_time() - start)


class _OpCount(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.ops = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        self.ops += 1
        return func(*args, **(kwargs or {}))


def augment_host_cost(batch: int, device: str) -> tuple[int, float]:
    """(aten ops, main-thread CPU ms) of ``augment_batch`` on one batch. On the CPU the images are
    tiny (16 px crops of ~24 px images), so the time is what issuing the ops and drawing the
    samples' random choices costs; on CUDA, 224 px from 500x375, kernels queued, not awaited."""
    dev = torch.device(device)
    size, shape = (224, (3, 375, 500)) if dev.type == "cuda" else (16, (3, 22, 26))
    gen = torch.Generator().manual_seed(batch)
    images = [torch.randint(0, 256, shape, dtype=torch.uint8, generator=gen).to(dev) for _ in range(batch)]
    recipe = DeviceRecipe(size, "deit")
    with _OpCount() as count:
        augment_batch(images, list(range(batch)), recipe)
    spent = []
    for r in range(5):
        if dev.type == "cuda":
            torch.cuda.synchronize()
        start = time.thread_time()
        augment_batch(images, [r * batch + i for i in range(batch)], recipe)
        spent.append(time.thread_time() - start)
    return count.ops, 1e3 * statistics.median(spent)


def host_budget(root: Path, device: str) -> list[tuple[str, int, int | None, float | None]]:
    """(stage, B, ops per batch, main-process CPU ms per batch) rows."""
    blobs = [f.read_bytes() for f in sorted(root.glob("train/*/*.jpg"))[:64]]
    recipe = DeviceRecipe(224, "deit")
    start = time.thread_time()
    [draw_sample(seed, 375, 500, recipe) for seed in range(256)]
    rows: list[tuple[str, int, int | None, float | None]] = [
        ("random choices (Python, per sample)", 256, 0, 1e3 * (time.thread_time() - start))
    ]
    for batch in (256, 512):
        ops, ms = augment_host_cost(batch, "cpu")
        rows.append(("augment (device_augment incl. its choices; CPU tensors at 16 px: issue + tiny kernels)", batch, ops, ms))
    if device == "cuda" and torch.cuda.is_available():
        ops, ms = augment_host_cost(256, "cuda")
        rows.append(("augment issue (device_augment, CUDA, 224 px)", 256, ops, ms))
    rows += [
        ("handover: one flat buffer + header (EncodedBatch)", 256, None, handover_ms(blobs, 256, collate_encoded)),
        ("handover: one tensor per image (the layout before)", 256, None, handover_ms(blobs, 256, collate_as_list)),
        ("pin: one flat buffer + header", 256, None, pin_ms(blobs, 256, True)),
        ("pin: one tensor per image (the layout before)", 256, None, pin_ms(blobs, 256, False)),
    ]
    return rows


def _budget_table(rows: list[tuple[str, int, int | None, float | None]]) -> list[str]:
    lines = ["| stage | B | aten ops per batch | main-process CPU ms per batch |", "| --- | ---: | ---: | ---: |"]
    for stage, batch, ops, ms in rows:
        lines.append(
            f"| {stage} | {batch} | {'' if ops is None else f'{ops:,}'} | {'not measured (needs CUDA)' if ms is None else f'{ms:.1f}'} |"
        )
    return lines


# ---------------------------------------------------------------- 2. loaders


def _cpu_seconds() -> dict[int, tuple[str, float]]:
    out = {}
    for p in psutil.process_iter(["name"]):
        try:
            t = p.cpu_times()
            out[p.pid] = (p.info["name"] or "?", t.user + t.system)
        except psutil.Error:
            continue
    return out


def _group(pid: int, name: str, me: int, ray_pids: set[int]) -> str | None:
    if pid == me:
        return "consumer"
    if name.startswith("ray::"):
        return "workers"
    if pid in ray_pids:
        return "Ray's own"
    try:
        return "workers" if psutil.Process(pid).ppid() == me else None
    except psutil.Error:
        return None


def _ray_system_pids() -> set[int]:
    names = ("raylet", "gcs_server", "dashboard", "log_monitor", "monitor", "runtime_env", "ray_client")
    pids = set()
    for p in psutil.process_iter(["name", "cmdline"]):
        try:
            text = p.info["name"] + " " + " ".join(p.info["cmdline"] or [])
        except (psutil.Error, TypeError):
            continue
        if any(n in text for n in names) and ("ray" in text):
            pids.add(p.pid)
    return pids


def measure_epoch(batches: Iterable[torch.Tensor]) -> dict[str, float]:
    """One epoch: img/s overall and from the first batch on, CPU seconds by process group."""
    me, ray_pids = os.getpid(), _ray_system_pids()
    before = _cpu_seconds()
    start = time.perf_counter()
    seen = first_n = 0
    first = None
    for x in batches:
        if first is None:
            first, first_n = time.perf_counter(), x.shape[0]
        seen += x.shape[0]
    end = time.perf_counter()
    after = _cpu_seconds()
    out = {"img/s": seen / (end - start), "steady": (seen - first_n) / max(end - first, 1e-9), "images": seen}
    for pid, (name, t) in after.items():
        group = _group(pid, name, me, ray_pids)
        if group:
            out[group] = out.get(group, 0.0) + t - before.get(pid, (name, 0.0))[1]
    return out


def dataloader_epochs(root: Path, workers: int) -> Callable[[], Iterable[torch.Tensor]]:
    bundle = load_datasets(config(root, "torch"))
    loader = DataLoader(bundle.train, batch_size=BATCH, num_workers=workers, shuffle=True, persistent_workers=workers > 0)
    return lambda: (x for x, _ in loader)


def ray_data_before(root: Path) -> Any:
    """The layout before this benchmark's profile: a read stage, then decode tasks of 64 images
    bundled from the read's small blocks (not fused), blocks re-sliced into batches by the consumer."""
    import ray.data

    data = config(root, "ray_data").data
    names = sorted(p.name for p in (root / "train").iterdir() if p.is_dir())
    ds = ray.data.read_binary_files(
        str(root / "train"),
        include_paths=True,
        file_extensions=[e.lstrip(".") for e in IMAGE_EXTENSIONS],
        shuffle=ray.data.FileShuffleConfig(seed=data.seed % 2**32),
    )
    return ds.map_batches(
        decode_and_augment,
        fn_kwargs={"data": data, "classes": {n: i for i, n in enumerate(names)}},
        batch_size=DECODE_BATCH,
        batch_format="numpy",
    )


def ray_epochs(ds: Any) -> Callable[[], Iterable[torch.Tensor]]:
    it = ds.iterator()
    return lambda: (b["image"] for b in it.iter_torch_batches(batch_size=BATCH, drop_last=False))


def ray_conversion_cost(blocks: int = 16) -> float:
    """Consumer CPU ms per image of ``iter_torch_batches`` over a materialized dataset of 64-image
    float32 blocks: the block -> torch conversion alone, without a streaming execution."""
    import ray.data

    arrays = [np.random.default_rng(i).random((BATCH, 3, 224, 224), dtype=np.float32) for i in range(blocks)]
    ds = ray.data.from_numpy_refs([ray.put(a) for a in arrays]).materialize()
    for _ in ds.iter_torch_batches(batch_size=BATCH):
        pass
    start = time.process_time()
    for _ in ds.iter_torch_batches(batch_size=BATCH):
        pass
    return 1e3 * (time.process_time() - start) / (blocks * BATCH)


def loader_rounds(root: Path, cores: int, rounds: int) -> dict[str, list[dict[str, float]]]:
    import ray.data

    ensure_ray(num_cpus=cores)
    ray.data.DataContext.get_current().enable_progress_bars = False
    pipelines = {
        f"DataLoader, {cores} worker processes": dataloader_epochs(root, cores),
        f"Ray Data, {cores} CPUs": ray_epochs(train_dataset(config(root, "ray_data"))),
        f"Ray Data, {cores} CPUs, layout before": ray_epochs(ray_data_before(root)),
    }
    for epochs in pipelines.values():  # start the workers and Ray's task processes before the clock
        for _ in epochs():
            pass
    results: dict[str, list[dict[str, float]]] = {name: [] for name in pipelines}
    for _ in range(rounds):
        for name, epochs in pipelines.items():
            results[name].append(measure_epoch(epochs()))
    return results


# ---------------------------------------------------------------- report


def _stage_table(rows: list[tuple[str, str, float | None]], device: str) -> list[str]:
    lines = ["| decode path | stage | img/s (1 core) | ms per image |", "| --- | --- | ---: | ---: |"]
    for path, stage, rate in rows:
        if rate is None:
            lines.append(f"| {path} | {stage} | not measured (no GPU) | |")
        else:
            lines.append(f"| {path} | {stage} | {rate:,.0f} | {1e3 / rate:.2f} |")
    if device != "cuda" or not torch.cuda.is_available():
        lines += ["", "GPU rows: not measured; on a GPU machine: `python benchmarks/bench_data.py --device cuda`."]
    return lines


def _loader_table(results: dict[str, list[dict[str, float]]], cores: int) -> list[str]:
    lines = [
        "| pipeline | img/s (median of rounds) | per core | steady img/s | CPU s per 1,000 images: workers / consumer / Ray's own |",
        "| --- | ---: | ---: | ---: | --- |",
    ]
    for name, runs in results.items():
        rate = statistics.median(r["img/s"] for r in runs)
        steady = statistics.median(r["steady"] for r in runs)
        cpu = [statistics.median(1e3 * r.get(g, 0.0) / r["images"] for r in runs) for g in ("workers", "consumer", "Ray's own")]
        lines.append(f"| {name} | {rate:.0f} | {rate / cores:.0f} | {steady:.0f} | {cpu[0]:.2f} / {cpu[1]:.2f} / {cpu[2]:.2f} |")
    base_name = next(iter(results))
    lines += [
        "",
        f"Per-round ratios against {base_name} (the same round, the same cores):",
        "",
        "| pipeline | img/s ratio per round | median | steady ratio per round | median |",
        "| --- | --- | ---: | --- | ---: |",
    ]
    base = results[base_name]
    for name, runs in list(results.items())[1:]:
        ratio = [r["img/s"] / b["img/s"] for r, b in zip(runs, base)]
        steady = [r["steady"] / b["steady"] for r, b in zip(runs, base)]
        lines.append(
            f"| {name} | {', '.join(f'{x:.2f}' for x in ratio)} | {statistics.median(ratio):.2f} | "
            f"{', '.join(f'{x:.2f}' for x in steady)} | {statistics.median(steady):.2f} |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=1000, help="training JPEGs in the folder (one epoch per loader per round)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--stage-images", type=int, default=64, help="images timed per stage")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--skip-loaders", action="store_true", help="stages only (no Ray)")
    parser.add_argument("--out")
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        console_logs_to(Path(tmp) / "ray.log")
        root = make_folder(Path(tmp) / "imagenet", args.images)
        stages = stage_rates(root, args.stage_images, args.device)
        budget = host_budget(root, args.device)
        results = None if args.skip_loaders else loader_rounds(root, cores, args.rounds)
        conversion = None if args.skip_loaders else ray_conversion_cost()
    ray.shutdown()
    lines = [
        f"### bench_data: the input path, {args.images} JPEGs of 500x375, DeiT's training transforms at 224 px",
        environment(args.device),
        "",
        f"Stages, one process, one thread, {args.stage_images} images:",
        "",
        *_stage_table(stages, args.device),
        "",
        "Host budget of `data.decode: gpu` per batch (one thread; ops counted with a TorchDispatchMode, each one or more kernel launches "
        "on CUDA):",
        "",
        *_budget_table(budget),
    ]
    if results is not None:
        lines += [
            "",
            f"Loaders on the same {cores} cores, {args.rounds} interleaved rounds of one epoch each, batch {BATCH}:",
            "",
            *_loader_table(results, cores),
            "",
            f"Ray Data's block -> torch conversion alone (a materialized dataset, no streaming execution): {conversion:.3f} CPU ms per "
            "image in the consumer.",
        ]
    append(args.out, "\n".join(lines + [""]))


if __name__ == "__main__":
    main()
