"""Per-trial start-up of a sweep, before and after running 1-worker trials in the Tune trial's
process, measured in one run: N tiny trials (a) in a plain loop, (b) as a sweep whose trials go
through Ray Train's TorchTrainer (``scaling.trainer=ray_train``, the old path) and (c) as a sweep
whose trials train in the reused Tune trial process (``scaling.trainer=auto``). Ray's own start is
timed apart and taken out: start-up per trial = (sweep - Ray start - plain loop) / N.
``--demo`` also times ``mjp demo`` (4 trials x 30 epochs) both ways, each in a fresh process.

    python benchmarks/bench_sweep.py [--trials 2 4] [--demo] [--out BENCHMARKS.md]
"""

from __future__ import annotations

import argparse
import io
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import ray
import torch
import yaml
from common import environment
from published import publish
from torch.utils.data import DataLoader

from sweep.study.load import load_study
from sweep.tuner.run import run_sweep
from trainables.data.datasets import load_datasets
from trainables.evaluation.accuracy import evaluate, evaluate_shuffles
from trainables.launch.ray_runtime import ensure_ray
from trainables.train.engine import build_model, build_state, seed_everything, train_one_epoch

PROJECT = Path(__file__).resolve().parent.parent
TINY = {
    "model": {"kwargs": {"patch_size": 2, "embed_dim": 32, "depth": 2, "num_heads": 2}},
    "data": {"batch_size": 64, "train_limit": 512, "val_limit": 128},
    "optim": {"epochs": 2},
    "tracking": {"experiment": "bench-sweep", "log_checkpoint": False},
}


def study(tmp: str, n: int, trainer: str):
    path = Path(tmp) / f"bench{n}{trainer}.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "name": f"bench{n}-{trainer}",
                "base": "trainables/configs/digits_vit_tiny.yaml",
                "train": TINY,
                "space": {"mjp.mask_ratio": {"type": "uniform", "low": 0.25, "high": 0.5}},
                "objective": {"metric": "val/top1"},
                "search": {"algorithm": "random", "seed": 0},
                "budget": {"trials": n, "max_concurrent": 1},
            }
        )
    )
    return load_study(str(path), overrides={"tracking.uri": f"sqlite:///{tmp}/mlflow.db", "scaling.trainer": trainer})


def plain(s, n: int) -> float:
    start = time.perf_counter()
    for i in range(n):
        cfg = s.recipe.config({"mjp.mask_ratio": 0.25 + 0.25 * i / max(n - 1, 1)})
        seed_everything(0)
        bundle = load_datasets(cfg)
        model = build_model(cfg, bundle.shape)
        train = DataLoader(bundle.train, batch_size=cfg.data.batch_size, shuffle=True, drop_last=True)
        val = DataLoader(bundle.val, batch_size=cfg.data.batch_size)
        state = build_state(cfg, model, len(train), 1)
        for _ in range(cfg.optim.epochs):
            train_one_epoch(cfg, state, train, torch.device("cpu"))
            state.epoch += 1
            evaluate(model, val, torch.device("cpu"))
        evaluate_shuffles(cfg, model, val, torch.device("cpu"))
    return time.perf_counter() - start


def sweep(s, tmp: str) -> tuple[float, float]:
    """(Ray start, sweep wall) in seconds, from a stopped Ray."""
    ray.shutdown()
    start = time.perf_counter()
    ensure_ray(num_cpus=2)
    ray_start = time.perf_counter() - start
    outcome = run_sweep(s, storage=f"{tmp}/ray", stream=io.StringIO())
    assert not outcome.failed and not outcome.interrupted, outcome.failed
    return ray_start, time.perf_counter() - start


def demo(trainer: str) -> float:
    with tempfile.TemporaryDirectory() as cwd:
        start = time.perf_counter()
        out = subprocess.run(
            [sys.executable, "-m", "sweep.cli", "demo", "--set", f"scaling.trainer={trainer}"],
            cwd=cwd,
            env={**__import__("os").environ, "PYTHONPATH": str(PROJECT)},
            capture_output=True,
            text=True,
        )
        wall = time.perf_counter() - start
    if out.returncode != 0:
        raise RuntimeError(f"mjp demo ({trainer}) failed: {out.stderr[-2000:]}")
    return wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--demo", action="store_true", help="also time `mjp demo` both ways (about 8 minutes)")
    parser.add_argument("--out")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.trials:
            t_plain = plain(study(tmp, n, "auto"), n)
            cells = [f"{n}", f"{t_plain:.1f}"]
            per_trial = {}
            for trainer in ("ray_train", "auto"):
                t_ray, t_sweep = sweep(study(tmp, n, trainer), tmp)
                per_trial[trainer] = (t_sweep - t_ray - t_plain) / n
                cells += [f"{t_sweep:.1f} (Ray {t_ray:.1f})", f"{per_trial[trainer]:.1f}"]
            cells.append(f"{per_trial['ray_train'] / per_trial['auto']:.1f}x")
            rows.append("| " + " | ".join(cells) + " |")
    ray.shutdown()
    lines = [
        "### bench_sweep: start-up per trial, N tiny digits trials (2 epochs each), one at a time",
        environment(),
        "",
        "| N | plain loop (s) | sweep via TorchTrainer (s) | start-up per trial (s) | sweep in the trial process (s) | start-up per "
        "trial (s) | before / after |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        *rows,
        "",
    ]
    if args.demo:
        before, after = demo("ray_train"), demo("auto")
        lines += [
            "`mjp demo` (quickstart: 4 trials x 30 epochs, 2 at a time), wall time of the whole command in a fresh process:",
            "",
            "| trials through | wall (s) |",
            "| --- | ---: |",
            f"| Ray Train's TorchTrainer (before) | {before:.0f} |",
            f"| the Tune trial's process (after) | {after:.0f} |",
            "",
        ]
    publish(args.out, "\n".join(lines))


if __name__ == "__main__":
    main()
