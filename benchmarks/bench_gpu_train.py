"""A multi-step Ray Train run of DeiT-S + MJP (Table 4 row J) on one GPU: img/s and peak memory.

One ``TorchTrainer`` worker runs the project's own engine (``build_model``, ``build_state``,
``train_one_epoch``: the DeiT recipe of ``imagenet_deit_small.yaml``, mixup included) on synthetic
224 px data: one fixed random batch kept on the device and stepped ``--steps`` times, as published
throughput benchmarks do, so the number is the GPU's and not the input pipeline's (that one is
``bench_data``). The first ``--warmup`` steps (``torch.compile`` happens there) are timed apart;
img/s is over the rest. Peak memory is ``torch.cuda.max_memory_allocated`` over the timed steps.
Run it on the GPU machine itself: the worker hands its numbers to the driver in a local file.

    python benchmarks/bench_gpu_train.py --steps 500 --batch 256 --amp bf16 --compile --out BENCHMARKS.md
    python benchmarks/bench_gpu_train.py --device cpu --model deit_tiny_patch16_224 --steps 4 --warmup 2 --batch 4 --amp none
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import ray
import torch
from common import environment
from published import publish

from trainables.launch.ray_runtime import console_logs_to, ensure_ray

PROJECT = Path(__file__).resolve().parent.parent


class FixedBatch:
    """The same ``[B, 3, 224, 224]`` batch ``steps`` times (already on the device)."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor, steps: int):
        self.x, self.y, self.steps = x, y, steps

    def __len__(self) -> int:
        return self.steps

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        return iter([(self.x, self.y)] * self.steps)


def train_loop(params: dict[str, Any]) -> None:
    import ray.train
    import ray.train.torch

    from trainables.config.build import load_config
    from trainables.data.info import DataShape
    from trainables.train.engine import build_algorithm, build_model, build_state, seed_everything, train_one_epoch

    cfg = load_config(PROJECT / "trainables" / "configs" / "imagenet_deit_small.yaml", params["overrides"])
    device = ray.train.torch.get_device()
    seed_everything(0)
    model = build_model(cfg, DataShape(num_classes=1000, in_chans=3, img_size=224)).to(device)
    algorithm = build_algorithm(cfg, model, 0, device)
    if cfg.runtime.channels_last:
        model = model.to(memory_format=torch.channels_last)
    model = ray.train.torch.prepare_model(model)
    if cfg.runtime.compile:
        model = torch.compile(model)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(cfg.data.batch_size, 3, 224, 224, generator=g).to(device)
    y = torch.randint(0, 1000, (cfg.data.batch_size,), generator=g).to(device)
    warmup, steps = params["warmup"], params["steps"]
    state = build_state(cfg, model, steps, 1, algorithm)
    start = time.perf_counter()
    train_one_epoch(cfg, state, FixedBatch(x, y, warmup), device)
    warm_s = time.perf_counter() - start
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    timed = train_one_epoch(cfg, state, FixedBatch(x, y, steps - warmup), device)
    peak = torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else float("nan")
    # Train V2 keeps only metrics reported with a checkpoint; the driver reads this file instead
    Path(params["result_file"]).write_text(json.dumps({**timed, "warmup_s": warm_s, "peak_gib": peak}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--warmup", type=int, default=50, help="steps before the clock starts (compilation happens here)")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--model", default="deit_small_patch16_224")
    parser.add_argument("--amp", choices=["none", "bf16"], default="bf16")
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--out")
    args = parser.parse_args()
    if not 0 < args.warmup < args.steps:
        parser.error(f"--warmup must be between 1 and --steps - 1 ({args.steps - 1}); got {args.warmup}")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device here (use --device cpu for a functional check)")

    from ray.train import RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

    overrides = [
        f"model.name={args.model}",
        f"data.batch_size={args.batch}",
        "optim.epochs=1",
        f"runtime.amp={args.amp}",
        f"runtime.compile={str(args.compile).lower()}",
        "mjp.variant=J",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        console_logs_to(Path(tmp) / "ray.log")
        ensure_ray(num_cpus=2 if args.device == "cpu" else None)
        result_file = Path(tmp) / "result.json"
        trainer = TorchTrainer(
            train_loop,
            train_loop_config={"overrides": overrides, "steps": args.steps, "warmup": args.warmup, "result_file": str(result_file)},
            scaling_config=ScalingConfig(num_workers=1, use_gpu=args.device == "cuda"),
            run_config=RunConfig(storage_path=tmp, name="bench-gpu-train"),
        )
        trainer.fit()
        m = json.loads(result_file.read_text())
    ray.shutdown()
    where = environment(args.device)
    publish(
        args.out,
        "\n".join(
            [
                f"### bench_gpu_train: Ray Train, 1 worker on {args.device}, {args.model} + MJP (J), batch {args.batch}, "
                f"{args.amp if args.amp != 'none' else 'fp32'}, {'compiled' if args.compile else 'eager'}, {args.steps} steps on a fixed "
                "synthetic batch",
                where,
                "",
                "| img/s (timed steps) | step (ms) | first steps incl. compile (s) | peak memory (GiB) | final train loss |",
                "| ---: | ---: | ---: | ---: | ---: |",
                f"| {m['perf/img_per_s']:,.0f} | {m['perf/step_ms']:.1f} | {m['warmup_s']:.1f} | "
                f"{'n/a' if m['peak_gib'] != m['peak_gib'] else format(m['peak_gib'], '.2f')} | {m['train/loss']:.3f} |",
                "",
            ]
        ),
    )


if __name__ == "__main__":
    main()
