"""Images/s of one training through Ray against a plain single-process loop, same model and data:
in the Tune trial's own process (``scaling.trainer=auto``, the default for one worker) and
through Ray Train's TorchTrainer with one worker (``scaling.trainer=ray_train``).

All run the same engine epoch (``trainables.train.engine.train_one_epoch``) on the same config with the
same thread count; the steady-state throughput of the last epoch is compared (the orchestration
overhead ratio; target <= 1.05). Wall time includes Ray's start and the run's set-up.

    python benchmarks/bench_train.py [--epochs 2] [--threads 2] [--out BENCHMARKS.md]
"""

from __future__ import annotations

import argparse
import io
import tempfile
import time
from pathlib import Path

import ray
import torch
from common import environment
from published import publish
from torch.utils.data import DataLoader

from sweep.tuner.training import run_training
from trainables.config.build import load_config
from trainables.data.datasets import load_datasets
from trainables.data.idx import FASHION_MNIST_DEFAULT
from trainables.train.engine import build_model, build_state, seed_everything, train_one_epoch

PROJECT = Path(__file__).resolve().parent.parent


def config(epochs: int, threads: int, tmp: str, trainer: str = "auto"):
    name = "fashion_vit_tiny.yaml" if Path(FASHION_MNIST_DEFAULT).is_dir() else "digits_vit_tiny.yaml"
    limit = ["data.train_limit=12800"] if name.startswith("fashion") else []
    return load_config(
        PROJECT / "trainables" / "configs" / name,
        [
            f"optim.epochs={epochs}",
            *limit,
            "data.val_limit=512",
            f"scaling.cpus_per_worker={threads}",
            f"scaling.trainer={trainer}",
            f"tracking.uri=sqlite:///{tmp}/mlflow.db",
            f"tracking.storage_path={tmp}/runs",
            "tracking.log_checkpoint=false",
        ],
    )


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
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        cfg = config(args.epochs, args.threads, tmp)
        plain_ips, plain_wall = plain(cfg, args.threads)
        rows.append(f"| plain single process | {plain_ips:.0f} | {plain_wall:.1f} | 1.000 |")
        for trainer, label in (("auto", "Ray: in the Tune trial's process"), ("ray_train", "Ray Train TorchTrainer, 1 worker")):
            ray.shutdown()
            start = time.perf_counter()
            outcome = run_training(config(args.epochs, args.threads, tmp, trainer), stream=io.StringIO())
            wall = time.perf_counter() - start
            assert outcome.error is None, outcome.error
            ips = outcome.metrics["perf/img_per_s"]
            rows.append(f"| {label} | {ips:.0f} | {wall:.1f} | {plain_ips / ips:.3f} |")
    ray.shutdown()
    table = "\n".join(
        [
            f"### bench_train: {cfg.data.name}, {cfg.model.name} {cfg.model.kwargs}, batch {cfg.data.batch_size}, {args.epochs} epochs, "
            f"{args.threads} threads",
            environment(),
            "",
            "| loop | img/s (last epoch) | wall (s, incl. start-up) | plain img/s / this |",
            "| --- | ---: | ---: | ---: |",
            *rows,
            "",
            "Orchestration overhead target: plain / Ray <= 1.05.",
            "",
        ]
    )
    publish(args.out, table)


if __name__ == "__main__":
    main()
