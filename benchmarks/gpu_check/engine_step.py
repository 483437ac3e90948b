"""Step: the training step Ray Train's workers run (``trainables.train.engine.train_one_epoch``,
the imagenet_deit_small.yaml recipe without mixup), Table 4 row A (no MJP) against row J (MJP), on
one fixed batch already on the device, so the step alone is timed. Ray Train adds a process
around this step, not work inside it; Ray itself cannot travel in the kit (docs/gpu-check.md)."""

from __future__ import annotations

import time
from typing import Any

from benchmarks.gpu_check.context import Sizes, device_of, sizes, step_args, synchronize, write_result

CONFIG = "trainables/configs/imagenet_deit_small.yaml"


class FixedBatches:
    """``n`` times the same ``(x, y)``: a loader that costs nothing."""

    def __init__(self, x: Any, y: Any, n: int):
        self.x, self.y, self.n = x, y, n

    def __len__(self) -> int:
        return self.n

    def __iter__(self):
        return iter([(self.x, self.y)] * self.n)


def engine_state(s: Sizes, variant: str, compiled: bool, device: Any) -> tuple[Any, Any]:
    """(config, TrainState) of one row, as a worker builds them (the model compiled after the hook)."""
    import torch

    from trainables.config.build import load_config
    from trainables.data.info import DataShape
    from trainables.train.engine import build_algorithm, build_model, build_state, seed_everything

    overrides = [
        f"mjp.variant={variant}",
        f"data.batch_size={s.batch}",
        f"runtime.amp={'bf16' if s.amp else 'none'}",
        "runtime.log_every=1000000",
    ]
    if s.model_kwargs:
        kwargs = {k: v for k, v in s.model_kwargs.items() if k not in ("img_size", "num_classes")}
        overrides += [f"model.name={s.model}", "model.kwargs={" + ", ".join(f"{k}: {v}" for k, v in kwargs.items()) + "}"]
    cfg = load_config(CONFIG, overrides)
    seed_everything(0)
    model = build_model(cfg, DataShape(num_classes=s.num_classes, in_chans=3, img_size=s.img_size)).to(device)
    algorithm = build_algorithm(cfg, model, 0, device)
    if compiled:
        model = torch.compile(model, backend=s.compile_backend)
    return cfg, build_state(cfg, model, 10**6, 1, algorithm)


def fixed_batch(s: Sizes, device: Any) -> tuple[Any, Any]:
    import torch

    g = torch.Generator().manual_seed(0)
    x = torch.randn(s.batch, 3, s.img_size, s.img_size, generator=g)
    return x.to(device), torch.randint(0, s.num_classes, (s.batch,), generator=g).to(device)


def time_row(s: Sizes, variant: str, compiled: bool, device: Any) -> dict[str, float | None]:
    import torch

    from trainables.train.engine import train_one_epoch

    cfg, state = engine_state(s, variant, compiled, device)
    x, y = fixed_batch(s, device)
    train_one_epoch(cfg, state, FixedBatches(x, y, s.warmup), device)  # warm-up, compile
    synchronize(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    start = time.perf_counter()
    train_one_epoch(cfg, state, FixedBatches(x, y, s.steps), device)
    synchronize(device)
    seconds = time.perf_counter() - start
    peak = torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else None
    return {"step_ms": 1e3 * seconds / s.steps, "img_s": s.batch * s.steps / seconds, "peak_gib": peak}


def main() -> None:
    args = step_args(__doc__, {"--compile": {"action": "store_true", "help": "torch.compile the model, as runtime.compile=true"}})
    s = sizes(args.mode)
    device = device_of(s)
    rows = {variant: time_row(s, variant, args.compile, device) for variant in ("A", "J")}
    write_result(
        args.out,
        {
            "compiled": args.compile,
            "backend": s.compile_backend if args.compile else None,
            **rows,
            "ratio": rows["J"]["step_ms"] / rows["A"]["step_ms"],
        },
        s,
    )


if __name__ == "__main__":
    from trainables.process_end import run_and_exit

    run_and_exit(main)  # no finalization (1.5 s of CPU after torch and timm): the next step starts sooner
