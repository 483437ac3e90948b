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
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ray
import torch
from common import environment
from data_bench.folder import BATCH, config, make_folder
from data_bench.host_budget import host_budget
from data_bench.loaders import loader_rounds, ray_conversion_cost
from PIL import Image
from published import publish

from trainables.data.gpu.augment import DeviceRecipe, augment_batch
from trainables.data.gpu.decode import decode_on_device
from trainables.data.transforms import image_transforms
from trainables.launch.ray_runtime import console_logs_to

# The images are data_bench/folder.py's, part 2 (the host budget) data_bench/host_budget.py's, part 3 (the
# loaders) data_bench/loaders.py's; the stages, the tables and the command are here.

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


def _budget_table(rows: list[tuple[str, int, int | None, float | None]]) -> list[str]:
    lines = ["| stage | B | aten ops per batch | main-process CPU ms per batch |", "| --- | ---: | ---: | ---: |"]
    for stage, batch, ops, ms in rows:
        lines.append(
            f"| {stage} | {batch} | {'' if ops is None else f'{ops:,}'} | {'not measured (needs CUDA)' if ms is None else f'{ms:.1f}'} |"
        )
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
    publish(args.out, "\n".join(lines + [""]))


if __name__ == "__main__":
    main()
