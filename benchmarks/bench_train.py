"""Images/s of the Ray Train loop (1 worker) against a plain single-process loop, same model and data.

Both run the same engine epoch (``trainables.engine.train_one_epoch``) on the same config with the
same thread count; the steady-state throughput of the last epoch is compared (the orchestration
overhead ratio; target <= 1.05). Ray's start-up is reported separately as wall time.

    python benchmarks/bench_train.py [--epochs 2] [--threads 2] [--out BENCHMARKS.md]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from common import append, environment

import torch
from torch.utils.data import DataLoader

from trainables.config import load_config
from trainables.data import FASHION_MNIST_DEFAULT, load_datasets
from trainables.driver import ensure_ray, run_training
from trainables.engine import build_model, build_state, seed_everything, train_one_epoch

PROJECT = Path(__file__).resolve().parent.parent


def config(epochs: int, threads: int, tmp: str):
    name = "fashion_vit_tiny.yaml" if Path(FASHION_MNIST_DEFAULT).is_dir() else "digits_vit_tiny.yaml"
    return load_config(PROJECT / "trainables" / "configs" / name, [
        f"optim.epochs={epochs}", "data.train_limit=12800", "data.val_limit=512", f"scaling.cpus_per_worker={threads}",
        f"tracking.uri=sqlite:///{tmp}/mlflow.db", f"tracking.storage_path={tmp}/runs", "tracking.log_checkpoint=false",
    ])


def plain(cfg, threads: int) -> tuple[float, float]:
    torch.set_num_threads(threads)
    seed_everything(0)
    start = time.perf_counter()
    bundle = load_datasets(cfg)
    model = build_model(cfg, bundle.shape)
    loader = DataLoader(bundle.train, batch_size=cfg.data.batch_size, shuffle=True, drop_last=True)
    state = build_state(cfg, model, len(loader), 1)
    for _ in range(cfg.optim.epochs):
        out = train_one_epoch(cfg, state, loader, torch.device("cpu"))
        state.epoch += 1
    return out["perf/img_per_s"], time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cfg = config(args.epochs, args.threads, tmp)
        plain_ips, plain_wall = plain(cfg, args.threads)
        start = time.perf_counter()
        ensure_ray(num_cpus=args.threads + 1)
        ray_start = time.perf_counter() - start
        outcome = run_training(cfg)
        ray_wall = time.perf_counter() - start
        ray_ips = outcome.metrics["perf/img_per_s"]
    table = "\n".join([
        f"### bench_train: {cfg.data.name}, {cfg.model.name} {cfg.model.kwargs}, batch {cfg.data.batch_size}, {cfg.data.train_limit} images x {args.epochs} epochs, {args.threads} threads",
        environment(),
        "",
        "| loop | img/s (last epoch) | wall (s, incl. start-up) |",
        "| --- | ---: | ---: |",
        f"| plain single process | {plain_ips:.0f} | {plain_wall:.1f} |",
        f"| Ray Train, 1 worker | {ray_ips:.0f} | {ray_wall:.1f} (Ray start {ray_start:.1f}) |",
        "",
        f"Orchestration overhead (plain img/s / Ray img/s): **{plain_ips / ray_ips:.3f}** (target <= 1.05)",
        "",
    ])
    append(args.out, table)


if __name__ == "__main__":
    main()
