"""bench_data, part 3: the loaders, in interleaved rounds (DataLoader, Ray Data, Ray Data as it was
laid out before) so that the machine's other load falls on all of them alike; per round one epoch
each: img/s over the epoch and from its first batch on (steady), and the CPU seconds per 1,000
images of every process involved (loader workers or Ray tasks, the consuming process, Ray's own);
and the consumer's CPU for Ray Data's block -> torch conversion alone."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import torch
from torch.utils.data import DataLoader

from data_bench.folder import BATCH, config
from trainables.data.datasets import load_datasets
from trainables.data.folder.image_folder import IMAGE_EXTENSIONS
from trainables.data.ray_data import DECODE_BATCH, decode_and_augment, train_dataset
from trainables.launch.ray_runtime import ensure_ray


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
