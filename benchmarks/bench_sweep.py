"""Wall time of a sweep of N tiny trials (Ray Tune + Optuna + Ray Train + MLflow) against the same
trials run one after another in a plain loop, for several N: the per-trial orchestration cost.

The sweep runs one trial at a time (max_concurrent 1) so both sides do the same work in sequence.

    python benchmarks/bench_sweep.py [--trials 2 4] [--out BENCHMARKS.md]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import yaml
from common import append, environment

import ray
import torch
from torch.utils.data import DataLoader

from sweep.run import run_sweep
from sweep.study import load_study
from trainables.data import load_datasets
from trainables.engine import build_model, build_state, evaluate, evaluate_shuffles, seed_everything, train_one_epoch

TINY = {
    "model": {"kwargs": {"patch_size": 2, "embed_dim": 32, "depth": 2, "num_heads": 2}},
    "data": {"batch_size": 64, "train_limit": 512, "val_limit": 128},
    "optim": {"epochs": 2},
    "tracking": {"experiment": "bench-sweep", "log_checkpoint": False},
}


def study(tmp: str, n: int):
    path = Path(tmp) / f"bench{n}.yaml"
    path.write_text(yaml.safe_dump({
        "name": f"bench{n}", "base": "trainables/configs/digits_vit_tiny.yaml", "train": TINY,
        "space": {"mjp.mask_ratio": {"type": "uniform", "low": 0.25, "high": 0.5}},
        "objective": {"metric": "val/top1"}, "search": {"algorithm": "random", "seed": 0},
        "budget": {"trials": n, "max_concurrent": 1},
    }))
    return load_study(str(path), overrides={"tracking.uri": f"sqlite:///{tmp}/mlflow.db"})


def plain(s, n: int) -> float:
    start = time.perf_counter()
    for i in range(n):
        cfg = s.train_config({"mjp.mask_ratio": 0.25 + 0.25 * i / max(n - 1, 1)})
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--out")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.trials:
            s = study(tmp, n)
            t_plain = plain(s, n)
            start = time.perf_counter()
            outcome = run_sweep(s, storage=f"{tmp}/ray")
            t_sweep = time.perf_counter() - start
            ray.shutdown()
            assert not any(t["error"] for t in outcome.trials)
            rows.append(f"| {n} | {t_plain:.1f} | {t_sweep:.1f} | {t_sweep / t_plain:.1f} | {(t_sweep - t_plain) / n:.1f} |")
    append(args.out, "\n".join([
        "### bench_sweep: N tiny digits trials (2 epochs each), one at a time",
        environment(),
        "",
        "| N trials | plain loop (s) | sweep (s, incl. Ray start) | sweep / plain | overhead per trial (s) |",
        "| ---: | ---: | ---: | ---: | ---: |",
        *rows,
        "",
    ]))


if __name__ == "__main__":
    main()
